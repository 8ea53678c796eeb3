# kafka-recon: `make demo` runs the whole idea once; `make test` runs the tests.
# Everything is installed into the repo (.venv, .jars) from the lock and the pom.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
UV     := $(VENV)/bin/uv
UV_VERSION := 0.13.9
MVN    := mvn -q -B -s jvm/settings.xml -f jvm/pom.xml
# the slowest tests are listed after each tier: where `make test`'s 40 minutes go (4 of them
# are the live-scheduler test's two 2-minute windows)
PYTEST_ARGS ?= --durations=15
# two pytest-xdist workers, a whole module to each at a time (module fixtures start their
# services once): most of the integration tier is waiting on services, schedulers and JVMs,
# so two at once on 2 cores take about two thirds of the time one does. The modules go out
# slowest first (tests/conftest.py), which xdist's own reordering by test count would undo
# (docs/development.md, "Running the tests")
WORKERS ?= -n 2 --dist loadfile --no-loadscope-reorder

.PHONY: all setup venv jars reader classes demo ui docs docs-site wheel drill drill-secured soak soak-hosts test test-unit test-integration lint lock clean bench bench-fleet postgres chromium prometheus redis mariadb

all: setup

setup: venv jars reader classes

venv: $(VENV)/.installed
$(VENV)/.installed: requirements.lock pyproject.toml
	@command -v java >/dev/null || { echo "java not found: install a JDK 17 (Debian: openjdk-17-jdk-headless)"; exit 2; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q uv==$(UV_VERSION)
	# the MySQL provider the tests stage MariaDB through builds mysqlclient against libmariadb
	@pkg-config --exists libmariadb 2>/dev/null || \
	  { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
	    apt-get install -y -qq pkg-config libmariadb-dev >/dev/null; } || \
	  { echo "libmariadb not found: apt-get install pkg-config libmariadb-dev (Debian's packages)"; exit 2; }
	# bytecode compiled once here, as pip does and uv does not unless told: every kafka-recon
	# process (a run, a spark-submit driver, an Airflow task) otherwise compiles the modules it
	# imports again, wherever it may not write them (PYTHONDONTWRITEBYTECODE, a read-only
	# image): 2.6 s of a 1M-record run's driver here (docs/performance.md)
	$(UV) pip sync -q --compile-bytecode --python $(PY) requirements.lock
	# compat mode: the repo root goes on sys.path, so new modules need no reinstall
	$(UV) pip install -q --python $(PY) --no-deps -e . --config-settings editable_mode=compat
	# the build leaves kafka_recon.egg-info in the checkout, which is on sys.path twice (the
	# working folder and the editable path): Airflow then finds the plugin's entry point three
	# times and shows "1 Plugin Import Error"; the installed dist-info is the one to keep
	rm -rf kafka_recon.egg-info
	$(PY) -m compileall -q kafka_recon
	# a registry whose answers uv must always revalidate (a mirror without ETags, as here) gets a
	# new cache entry for every download and every sdist build (pyspark's: 1.3 GB each); the
	# old ones are unreachable and were filling the disk, so they go
	$(UV) cache prune -q
	touch $@

jars: .jars/.installed
.jars/.installed: jvm/pom.xml jvm/settings.xml
	@command -v mvn >/dev/null || { echo "mvn not found: install Maven (Debian: maven)"; exit 2; }
	rm -rf .jars/kafka .jars/spark .jars/lineage .jars/flume .jars/mirror .jars/s3 .jars/s3proxy .jars/lake .jars/connect .jars/connect-plugins kafka_recon/jars
	$(MVN) -P kafka dependency:copy-dependencies
	$(MVN) -P spark dependency:copy-dependencies
	$(MVN) -P lineage dependency:copy-dependencies
	$(MVN) -P flume dependency:copy-dependencies
	$(MVN) -P mirror dependency:copy-dependencies
	$(MVN) -P s3 dependency:copy-dependencies
	$(MVN) -P s3proxy dependency:copy-dependencies
	$(MVN) -P lake dependency:copy-dependencies
	$(MVN) -P connect dependency:copy-dependencies
	$(MVN) -P debezium dependency:copy-dependencies
	touch $@

# kafka-recon's window reader (jvm/src), a Spark source compiled against the installed pyspark's
# own jars and the Kafka client Maven resolved, so it always matches the Spark that runs it
READER_SRC := $(shell find jvm/src/main/java -name '*.java')
READER_JAR := kafka_recon/jars/kafka-recon-reader.jar
# the reader compiles against the installed PySpark's jars and the Kafka client (from any
# folder: `make bench` compiles the code before's reader in its worktree too)
READER_CLASSPATH = $$($(abspath $(PY)) -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')/*:kafka_recon/jars/*
reader: $(READER_JAR)
$(READER_JAR): $(READER_SRC) .jars/.installed $(VENV)/.installed
	@command -v javac >/dev/null || { echo "javac not found: install a JDK 17 (Debian: openjdk-17-jdk-headless)"; exit 2; }
	rm -rf .jars/reader-classes $@
	javac --release 17 -Xlint:all,-path,-serial -Werror -d .jars/reader-classes \
	  -cp "$(READER_CLASSPATH)" \
	  $(READER_SRC)
	jar cf $@ -C .jars/reader-classes .
	rm -rf .jars/reader-classes

# the Spark driver's class archive: every later run's Spark starts a few seconds sooner; a JVM
# that cannot make one only makes runs slower, so setup goes on without it
classes: .jars/spark-classes.jsa
.jars/spark-classes.jsa: .jars/.installed $(READER_JAR) $(VENV)/.installed kafka_recon/spark/classes.py
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m kafka_recon class-archive --out $@ || \
	  echo "warning: no class archive made; runs work without it, only slower"

demo: setup
	$(PY) -m harness.demo

# Airflow on loopback with the demo flow's history on the Reconciliation page; Ctrl-C stops it
ui: setup postgres
	$(PY) -m harness.demo.ui

# the documents made from the code: docs/layers.md (the import graph), docs/reference/ (the
# flow config's and result.json's fields, the settings) and docs/schemas/ (the JSON Schema of
# result.json and of every file a run writes); a unit test fails when stale
docs: setup
	$(PY) -m harness.docs

# the documentation site (MkDocs, strict: a broken link or page fails it) into site/
docs-site: venv
	$(VENV)/bin/mkdocs build --strict

# the product: one wheel with the package, its suites, templates and Spark's jars (the window
# reader compiled first: setup.py refuses a wheel without it)
wheel: reader
	rm -rf build
	$(PY) -m build --wheel --outdir dist .
	rm -rf kafka_recon.egg-info

# the loss drill: all 23 scenarios on a real three-broker cluster, a Flume agent, Spark
# streaming writers and a MariaDB upstream;
# writes docs/drill.md and docs/drill.json. DRILL_ARGS="--scenario S2 S5" for a subset, whose
# matrix goes to drill-out/ (a partial run never replaces the published one)
DRILL_ARGS ?=
drill: setup
	$(PY) -m harness.drill $(DRILL_ARGS)

# S2, S5 and S12 on a secured cluster (SASL_SSL, mTLS, ACLs), kafka-recon reading over SASL_SSL as
# a least-privilege principal; writes docs/drill-secured.md
drill-secured: setup
	$(PY) -m harness.drill --secured --scenario S2 S5 S12 --docs docs $(DRILL_ARGS)

# the soak: Airflow's live scheduler runs a 5-minute flow for 45 minutes while its pipeline
# never pauses and faults strike at random; every window is judged against the truth. About
# an hour in all (setup, 45 minutes, the last windows' runs); writes docs/soak.md and
# docs/soak.json. SOAK_ARGS="--minutes 60 --seed 7" to change it
SOAK_ARGS ?=
soak: setup postgres
	$(PY) -m harness.soak $(SOAK_ARGS)

# the soak on two hosts (root: network namespaces): Airflow's CeleryExecutor with two worker
# hosts, run folders on the S3 server, the store in PostgreSQL, three flows for 60 minutes
# while hosts die, networks are cut, the store, the S3 server, the scheduler and brokers
# restart; every window judged against the truth. About 80 minutes in all; writes
# docs/soak-hosts.md and docs/soak-hosts.json. SOAK_HOSTS_ARGS="--minutes 90 --seed 7"
soak-hosts: setup postgres redis
	$(PY) -m harness.soak.hosts $(SOAK_HOSTS_ARGS)

# the integration tier runs a private PostgreSQL from Debian's package
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get install -y -qq postgresql >/dev/null; } || \
	  { echo "PostgreSQL not found: apt-get install postgresql (Debian's package)"; exit 2; }

# the UI screenshots use Debian's chromium (driven by playwright, which downloads nothing)
chromium:
	@command -v chromium >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } || \
	  { echo "chromium not found: apt-get install chromium (Debian's package)"; exit 2; }

# the two-host test's Celery broker is Debian's Redis
redis:
	@command -v redis-server >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get install -y -qq redis-server >/dev/null; } || \
	  { echo "redis-server not found: apt-get install redis-server (Debian's package)"; exit 2; }

# MySQL-family tiers are tested against Debian's MariaDB (its own server per test, no service)
mariadb:
	@command -v mariadbd >/dev/null || test -x /usr/sbin/mariadbd || \
	  { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server >/dev/null; } || \
	  { echo "mariadbd not found: apt-get install mariadb-server (Debian's package)"; exit 2; }

# the metrics test has Debian's Prometheus scrape the plugin
prometheus:
	@command -v prometheus >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get install -y -qq prometheus >/dev/null; } || \
	  { echo "prometheus not found: apt-get install prometheus (Debian's package)"; exit 2; }

# under make test a missing chromium fails the screenshot test instead of skipping it, and a
# class archive setup could not make fails its test instead of being made there
test: setup postgres chromium prometheus redis mariadb
	$(PY) -m pytest -m unit $(WORKERS) $(PYTEST_ARGS)
	KAFKA_RECON_REQUIRE_CHROMIUM=1 KAFKA_RECON_REQUIRE_CLASS_ARCHIVE=1 \
	  $(PY) -m pytest -m integration $(WORKERS) $(PYTEST_ARGS)

test-unit: setup
	$(PY) -m pytest -m unit $(WORKERS) $(PYTEST_ARGS)

test-integration: setup postgres chromium prometheus redis mariadb
	KAFKA_RECON_REQUIRE_CHROMIUM=1 KAFKA_RECON_REQUIRE_CLASS_ARCHIVE=1 \
	  $(PY) -m pytest -m integration $(WORKERS) $(PYTEST_ARGS)

# speed and memory goals: never timed tests. The targets' table (a small window of 10k records
# and 1M, each with a Spark of its own and through a warm Spark Connect server; 5M and 10M for
# the slope; the code before issue 65 as reader g from a worktree, at 10k) takes about 40
# minutes on 2 cores; BENCH_ARGS="--records 10000,1000000 --readers d,f,h --masters
# local[2],connect --other-sizes 10000,1000000" for a quicker one.
BENCH_BEFORE ?= 0b6754f
BENCH_ARGS ?= --records 10000,1000000,5000000,10000000 --repeats 3 --readers a,b,c,d,f,h \
	--masters local[2],connect --other-sizes 10000,1000000 --scale-repeats 1
bench: setup
	-command -v kcat >/dev/null || (apt-get install -y -qq kcat >/dev/null 2>&1 || true)
	rm -rf bench-out/before && git worktree prune && \
		git worktree add --detach bench-out/before $(BENCH_BEFORE) && \
		ln -sfn $(CURDIR)/.jars bench-out/before/.jars
	# its jars as setup places ours, and its window reader compiled from its own source
	mkdir -p bench-out/before/kafka_recon/jars
	cp $(filter-out $(READER_JAR),$(wildcard kafka_recon/jars/*.jar)) bench-out/before/kafka_recon/jars/
	rm -rf bench-out/reader-classes && cd bench-out/before && javac --release 17 -nowarn \
	  -d ../reader-classes \
	  -cp "$(READER_CLASSPATH)" \
	  $$(find jvm/src/main/java -name '*.java') && jar cf $(READER_JAR) -C ../reader-classes .
	# its bytecode compiled as setup compiles ours: the comparison is of the code, not of imports
	$(PY) -m compileall -q bench-out/before/kafka_recon bench-out/before/spark_jobs
	# the page is written even when a size failed (it says so), and make fails after
	$(PY) -m bench.run $(BENCH_ARGS) --before bench-out/before; status=$$?; \
		$(PY) -m bench.report && exit $$status

# a fleet: 20 flows on 5-minute windows under Airflow's live scheduler for 30 minutes, through
# one warm Spark Connect server, fed by one process (about 45 minutes in all); writes
# bench/fleet.json, which `python -m bench.report` then reads (FLEET_ARGS="--flows 50 --out
# bench/fleet-50.json" for the fifty)
FLEET_ARGS ?=
bench-fleet: setup postgres
	$(PY) -m bench.fleet $(FLEET_ARGS); status=$$?; $(PY) -m bench.report && exit $$status

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy kafka_recon harness dags bench plugins

# re-resolve the lock after changing pyproject.toml
lock: venv
	$(UV) pip compile -q pyproject.toml --extra dev --python-version 3.11 -o requirements.lock

clean:
	rm -rf $(VENV) .jars kafka_recon/jars dist build site demo-out ui-out drill-out soak-out runs bench-out test-artifacts .pytest_cache .mypy_cache .ruff_cache
