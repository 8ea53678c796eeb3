"""Every setting kafka-recon reads, in one place.

A setting comes from, in order: its environment variable; the `[kafka_recon]` section of
Airflow's configuration (`airflow.cfg`, or `AIRFLOW__KAFKA_RECON__<KEY>`), read through
`airflow.configuration` when Airflow is installed; its default. Nothing a run writes defaults to
a place inside the installed package: the paths default under kafka-recon's home,
`$AIRFLOW_HOME/kafka-recon` in Airflow, the current directory for the `kafka-recon` command.

The settings are listed in `SETTINGS` (and, generated from it, in docs/reference/settings.md).
A value that cannot be used is a `UsageError` naming the variable.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, NamedTuple

from kafka_recon.errors import ConfigError, MissingJarsError, UsageError

# what ships inside the package and is only read: the Spark entry points, the suites, the jars
PACKAGE = Path(__file__).resolve().parent
DEFAULT_ATTACH_MAX_BYTES = 5 * 1024 * 1024
SECTION = "kafka_recon"


class Setting(NamedTuple):
    var: str  # the environment variable
    key: str  # the `[kafka_recon]` key of Airflow's configuration ('' if none)
    default: str
    what: str


SETTINGS: tuple[Setting, ...] = (
    Setting('KAFKA_RECON_HOME', 'home',
            '`$AIRFLOW_HOME/kafka-recon` in Airflow, the current directory for the CLI',
            'where the other paths default'),
    Setting('KAFKA_RECON_CONFIG', 'config',
            '`<home>/flows.yaml`',
            'the flow config'),
    Setting('KAFKA_RECON_OUT', 'runs',
            '`<home>/runs`',
            'the runs root: one folder per flow and window; a folder, or '
            '`s3://<conn>@bucket/prefix` (docs/run-folder.md)'),
    Setting('KAFKA_RECON_STORE', 'store',
            '`sqlite:///<runs>/history.db`',
            "kafka-recon's database (history, window leases): URL or connection id"),
    Setting('KAFKA_RECON_HISTORY', 'history',
            'none',
            "the store's older name, read when `KAFKA_RECON_STORE` is not set"),
    Setting('KAFKA_RECON_SNAPSHOTS', 'snapshots',
            'the store, where `KAFKA_RECON_STORE` is set; else `<runs>/snapshots.db`',
            'snapshot store (Flume counters, flight recorder): a file or URL'),
    Setting('KAFKA_RECON_SPARK_JARS', 'spark_jars',
            "the package's `jars/`",
            "Spark's jars: the window reader, Kafka client, JDBC drivers"),
    Setting('KAFKA_RECON_JARS', 'jars',
            '`<checkout>/.jars`, else `<home>/jars`',
            "other JVM parts (lineage/, the class archive; a checkout's test services)"),
    Setting('KAFKA_RECON_SPARK_JOBS', 'spark_jobs',
            "the package's `jobs/`",
            'the spark-submit entry points'),
    Setting('KAFKA_RECON_EXPECTATIONS', 'expectations',
            "the package's `expectations/`",
            'the Great Expectations context'),
    Setting('KAFKA_RECON_SNAPSHOT_RETENTION_DAYS', '',
            '14',
            "how long the flight recorder's snapshots are kept"),
    Setting('KAFKA_RECON_UI_URL', '',
            "Airflow's `[api] base_url`, where set",
            "Airflow's address, for links in mails"),
    Setting('KAFKA_RECON_METRICS_TOKEN', '',
            'none',
            'the bearer token a scraper may use for /recon/metrics'),
    Setting('KAFKA_RECON_MAIL_ATTACH_MAX_BYTES', '',
            '5 MiB',
            'id files attached to a mail, in total'),
    Setting('KAFKA_RECON_TASK_RETRIES', '',
            '2',
            'retries of a task on an error a retry may clear (never a verdict)'),
    Setting('KAFKA_RECON_REPAIR_WAIT_HOURS', '',
            '48',
            "how long recon_repair waits for an owner's answer; then it writes nothing"),
    Setting('KAFKA_RECON_LEASE_SECONDS', 'lease_seconds',
            '300',
            "how long a window's lease outlives its holder's last heartbeat"),
    Setting('KAFKA_RECON_TRANSACTION_WAIT_SECONDS', 'transaction_wait_seconds', '60',
            "how long staging waits for an open transaction holding back a window's read; "
            'then the run is inconclusive, naming it'),
    Setting('KAFKA_RECON_REPLAY_SLOTS', 'replay_slots',
            '2',
            "replays at once against one Kafka cluster (its Airflow pool's size)"),
    Setting('KAFKA_RECON_JVM_OPTIONS', '',
            'see `DEFAULT_JVM_OPTIONS`, `SMALL_WINDOW_JVM_OPTIONS`',
            "Spark's JVMs' options (empty: defaults)"),
    Setting('KAFKA_RECON_CLASS_ARCHIVE', '',
            '`<jars>/spark-classes.jsa`',
            "Spark driver's class archive ('': none)"),
    Setting('KAFKA_RECON_SPARK_REMOTE', '',
            'none',
            'a Spark Connect server (`sc://host:port`) for `run`'),
    Setting('KAFKA_RECON_KEEP_REPLAYS', '',
            '0',
            "1: also keep the first replay's records as Parquet (debugging)"),
    Setting('KAFKA_RECON_CONN_<ID>', '',
            'none',
            'a connection resolved for Spark by the Airflow task (internal)'),
    Setting('KAFKA_RECON_RUN_OWNER', '',
            'none',
            'the Airflow run a Spark job belongs to (internal)'),
)


def checkout() -> Path | None:
    """The repository this package runs from (an editable install); None once installed."""
    root = PACKAGE.parent
    return root if (root / "pyproject.toml").is_file() and (root / "harness").is_dir() else None


# kept for the harness, tests and docs of a checkout; the package itself never writes there
REPO_ROOT = PACKAGE.parent

# the face that started this process: the CLI's home defaults to the current directory
_cli = False


def use_cli_defaults() -> None:
    """Called by `kafka-recon`: its home defaults to the current directory, not Airflow's."""
    global _cli
    _cli = True


def airflow_deployed() -> bool:
    """True in an Airflow process, or where an Airflow deployment is configured (AIRFLOW_HOME,
    an airflow.cfg, AIRFLOW__* settings): only then is Airflow's configuration read, since
    importing it creates Airflow's home and logs folder where none was."""
    return ("airflow.configuration" in sys.modules or "AIRFLOW_HOME" in os.environ
            or any(k.startswith("AIRFLOW__") for k in os.environ)
            or (airflow_home() / "airflow.cfg").is_file())


def _airflow_conf() -> Any:
    """Airflow's configuration, if Airflow is installed and deployed here (only asked when a
    setting is not in the environment: a Spark job gets every path handed to it)."""
    return _imported_airflow_conf() if airflow_deployed() else None


@functools.cache
def _imported_airflow_conf() -> Any:
    """The import, once per process; whether Airflow is deployed is asked each time."""
    try:
        from airflow.configuration import conf
    except ImportError:
        return None
    return conf


# set in a Spark job's environment with every path resolved: it never reads Airflow's config
RESOLVED_VAR = "KAFKA_RECON_SETTINGS_RESOLVED"


def _airflow_option(key: str) -> str | None:
    if os.environ.get(RESOLVED_VAR) == "1":
        return None
    conf = _airflow_conf()
    if conf is None:
        return None
    value = conf.get(SECTION, key, fallback=None)
    return str(value) if value not in (None, "") else None


def setting(var: str, key: str | None) -> tuple[str | None, str]:
    """A setting's raw value and where it came from (for messages): the environment variable,
    else Airflow's `[kafka_recon] <key>`; (None, '') when neither sets it."""
    value = os.environ.get(var)
    if value:
        return value, var
    if key is not None:
        value = _airflow_option(key)
        if value:
            return value, f"[{SECTION}] {key} of Airflow's configuration"
    return None, ""


def airflow_home() -> Path:
    """Airflow's home, by Airflow's own rule (AIRFLOW_HOME, else ~/airflow)."""
    return Path(os.environ.get("AIRFLOW_HOME") or Path.home() / "airflow").expanduser()


def home() -> Path:
    value, _ = setting("KAFKA_RECON_HOME", "home")
    if value:
        return Path(value).expanduser()
    return Path.cwd() if _cli else airflow_home() / "kafka-recon"


def where(var: str, key: str | None, default: str) -> str:
    """How a path setting was decided, for a message that says where kafka-recon looked."""
    _, source = setting(var, key)
    return f"from {source}" if source else f"the default, {default}"


def _path(var: str, key: str | None, default: Callable[[], Path]) -> Path:
    value, _ = setting(var, key)
    return Path(value).expanduser() if value else default()


def config_path() -> Path:
    return _path("KAFKA_RECON_CONFIG", "config", lambda: home() / "flows.yaml")


def config_where() -> str:
    """Where the flow config was looked for and why there: for the missing-config error."""
    base = "kafka-recon's home (KAFKA_RECON_HOME, [kafka_recon] home, else " + (
        "the current directory)" if _cli else "$AIRFLOW_HOME/kafka-recon)")
    return f"{config_path()} ({where('KAFKA_RECON_CONFIG', 'config', 'flows.yaml in ' + base)})"


def existing_config(hint: str = "") -> Path:
    """The configured flow config; a missing one is a ConfigError saying where it was looked
    for (the DAG files' import error, the command line's one line)."""
    path = config_path()
    if not path.is_file():
        raise ConfigError(f"no flow config at {config_where()}{hint}")
    return path


def runs_location() -> str:
    """Where run folders go, as set: a local folder (`file://` too) or an object store's
    folder, `s3://[<connection id>@]bucket/prefix` (kafka_recon.stores.objects)."""
    value, _ = setting("KAFKA_RECON_OUT", "runs")
    if value and "://" in value and not value.startswith("file://"):
        return value
    return str(runs_root())


def runs_remote() -> bool:
    """The runs root is in an object store: nothing of a run lies on this host's disk."""
    return "://" in runs_location()


def runs_root() -> Path:
    """The local runs root (for an object store's, kafka_recon.stores.objects.runs_root)."""
    value, where_ = setting("KAFKA_RECON_OUT", "runs")
    if value and value.startswith("file://"):
        return Path(value.removeprefix("file://")).expanduser()
    if value and "://" in value:
        raise ConfigError(f"{where_} is {value}, an object store: this needs a local folder "
                          "(set KAFKA_RECON_STORE to a database every host reaches)")
    return _path("KAFKA_RECON_OUT", "runs", lambda: home() / "runs")


def jars_dir() -> Path:
    """JVM parts that do not ship in the wheel: the lineage listener, the class archive, and in
    a checkout the test services' Kafka, Flume and MirrorMaker."""
    root = checkout()
    return _path("KAFKA_RECON_JARS", "jars",
                 lambda: root / ".jars" if root else home() / "jars")


def spark_jars_dir() -> Path:
    return _path("KAFKA_RECON_SPARK_JARS", "spark_jars", lambda: PACKAGE / "jars")


def spark_jobs_dir() -> Path:
    return _path("KAFKA_RECON_SPARK_JOBS", "spark_jobs", lambda: PACKAGE / "jobs")


def expectations_dir() -> Path:
    return _path("KAFKA_RECON_EXPECTATIONS", "expectations",
                 lambda: PACKAGE / "expectations")


def store_conn() -> str | None:
    """kafka-recon's database, an SQLAlchemy URL or a connection id; None: SQLite in the runs
    root (one host). `KAFKA_RECON_HISTORY` is its older name."""
    return setting("KAFKA_RECON_STORE", "store")[0] or setting("KAFKA_RECON_HISTORY", "history")[0]


def snapshots_path() -> Path:
    def default() -> Path:
        legacy = runs_root() / "flume.db"  # the store's name before it also held the recorder's
        current = runs_root() / "snapshots.db"
        return legacy if legacy.exists() and not current.exists() else current

    return _path("KAFKA_RECON_SNAPSHOTS", "snapshots", default)


def resolved_paths() -> dict[str, str]:
    """Every path setting as this process resolved it, as environment variables: handed to a
    Spark job, which must write where the task that started it would, without reading Airflow's
    configuration again."""
    env = {"KAFKA_RECON_HOME": str(home()), "KAFKA_RECON_CONFIG": str(config_path()),
           "KAFKA_RECON_OUT": runs_location(),
           "KAFKA_RECON_JARS": str(jars_dir()), "KAFKA_RECON_SPARK_JARS": str(spark_jars_dir()),
           "KAFKA_RECON_SPARK_JOBS": str(spark_jobs_dir()),
           "KAFKA_RECON_EXPECTATIONS": str(expectations_dir()),
           "KAFKA_RECON_LEASE_SECONDS": str(lease_seconds()), RESOLVED_VAR: "1"}
    store = store_conn()
    if store:
        env["KAFKA_RECON_STORE"] = store
    snapshots = setting("KAFKA_RECON_SNAPSHOTS", "snapshots")[0]
    if snapshots:  # else the store's, or the runs root's, as above
        env["KAFKA_RECON_SNAPSHOTS"] = snapshots
    return env


def metrics_token() -> str | None:
    return os.environ.get("KAFKA_RECON_METRICS_TOKEN") or None


def ui_url() -> str | None:
    """The Airflow address owners reach, for links in mails and alerts: KAFKA_RECON_UI_URL,
    else Airflow's own `[api] base_url` where the deployment set it."""
    value = os.environ.get("KAFKA_RECON_UI_URL")
    if value:
        return value
    conf = None if os.environ.get(RESOLVED_VAR) == "1" else _airflow_conf()
    base = conf.get("api", "base_url", fallback=None) if conf is not None else None
    return str(base) if base else None


def _count(var: str, default: int) -> int:
    raw = os.environ.get(var, str(default))
    try:
        value = int(raw)
    except ValueError:
        raise UsageError(f"{var}={raw!r}: expected a whole number") from None
    if value < 0:
        raise UsageError(f"{var}={raw!r}: must not be negative")
    return value


def mail_attach_max_bytes() -> int:
    return _count("KAFKA_RECON_MAIL_ATTACH_MAX_BYTES", DEFAULT_ATTACH_MAX_BYTES)


def task_retries() -> int:
    return _count("KAFKA_RECON_TASK_RETRIES", 2)


def repair_wait() -> timedelta:
    return timedelta(hours=_count("KAFKA_RECON_REPAIR_WAIT_HOURS", 48))


def snapshot_retention_days() -> int:
    return _count("KAFKA_RECON_SNAPSHOT_RETENTION_DAYS", 14)


def _setting_count(var: str, key: str, default: int, least: int) -> int:
    raw, where = setting(var, key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise UsageError(f"{where}={raw!r}: expected a whole number") from None
    if value < least:
        raise UsageError(f"{where}={raw!r}: must be at least {least}")
    return value


def lease_seconds() -> int:
    """How long a window's lease outlives its holder's last heartbeat: a dead worker's run stops
    holding its window this long after it died (kafka_recon.stores.lease)."""
    return _setting_count("KAFKA_RECON_LEASE_SECONDS", "lease_seconds", 300, 10)


def transaction_wait_seconds() -> int:
    """How long staging waits for the transactions open on a window's partitions to end before
    the run is inconclusive, naming them (kafka_recon.cluster.transactions)."""
    return _setting_count("KAFKA_RECON_TRANSACTION_WAIT_SECONDS", "transaction_wait_seconds",
                          60, 0)


def replay_slots() -> int:
    """How many replays may read one Kafka cluster at once (the size of its Airflow pool)."""
    return _setting_count("KAFKA_RECON_REPLAY_SLOTS", "replay_slots", 2, 1)


# kafka_recon.spark.conf.spark_conf says why these HotSpot options, measured by bench.tune: for
# a window of known size up to SMALL_JIT_WINDOW records the JIT's first tier only (a short run
# pays to compile hot code a second time and rarely runs it long enough to gain), else both
DEFAULT_JVM_OPTIONS = "-XX:+UseParallelGC -XX:CompileThresholdScaling=3"
SMALL_WINDOW_JVM_OPTIONS = "-XX:+UseParallelGC -XX:TieredStopAtLevel=1"
SMALL_JIT_WINDOW = 500_000  # records: the largest size measured where the first tier won


def jvm_options(records: int | None = None) -> str:
    """The Spark JVMs' options beside the UTC time zone: `KAFKA_RECON_JVM_OPTIONS` (empty: the
    JVM's own defaults), else kafka-recon's measured ones for a window of `records` records
    (None: not known)."""
    own = SMALL_WINDOW_JVM_OPTIONS if records is not None and records <= SMALL_JIT_WINDOW \
        else DEFAULT_JVM_OPTIONS
    raw = os.environ.get("KAFKA_RECON_JVM_OPTIONS", own).strip()
    bad = [o for o in raw.split() if not o.startswith("-")]
    if bad:
        raise UsageError(f"KAFKA_RECON_JVM_OPTIONS={raw!r}: {bad[0]!r} is not a JVM option "
                         "(each starts with '-')")
    return raw


def spark_remote(given: str | None = None) -> str | None:
    """The Spark Connect server a run uses instead of a Spark of its own: `given` (the command
    line's --remote), else `KAFKA_RECON_SPARK_REMOTE`; None: the run starts its own Spark."""
    from urllib.parse import urlsplit

    raw = (given if given is not None else os.environ.get("KAFKA_RECON_SPARK_REMOTE", "")).strip()
    if not raw:
        return None
    where = "--remote" if given is not None else "KAFKA_RECON_SPARK_REMOTE"
    try:
        url = urlsplit(shown_remote(raw))
        good = url.scheme == "sc" and bool(url.hostname) and url.port != 0
    except ValueError:  # a port that is not one
        good = False
    if not good:
        raise UsageError(f"{where}={shown_remote(raw)!r}: expected a Spark Connect URL, "
                         "sc://host:port")
    return raw


def shown_remote(url: str) -> str:
    """A Spark Connect URL fit for a message or a log: what follows /; (a token) left out."""
    return url.split("/;", 1)[0]


def class_archive_path() -> Path | None:
    """Where the Spark driver's class archive is (`kafka_recon.spark.classes`), made or not:
    `KAFKA_RECON_CLASS_ARCHIVE`, empty for none, else `spark-classes.jsa` among the jars."""
    raw = os.environ.get("KAFKA_RECON_CLASS_ARCHIVE")
    if raw is None:
        return jars_dir() / "spark-classes.jsa"
    return Path(raw) if raw.strip() else None


def keep_replays() -> bool:
    """Keep the first replay's records on disk even when the reconcile reads them in memory."""
    raw = os.environ.get("KAFKA_RECON_KEEP_REPLAYS", "0")
    if raw not in ("0", "1"):
        raise UsageError(f"KAFKA_RECON_KEEP_REPLAYS={raw!r}: expected 0 or 1")
    return raw == "1"


# the Airflow run a Spark job belongs to, handed in its environment like the connections
RUN_OWNER_VAR = "KAFKA_RECON_RUN_OWNER"


def run_owner() -> str | None:
    return os.environ.get(RUN_OWNER_VAR) or None


def conn_env_var(conn_id: str, prefix: str = "KAFKA_RECON_CONN_") -> str:
    """The variable a connection id is read from, spelled as Airflow spells AIRFLOW_CONN_<ID>;
    by default where an Airflow task hands a connection it resolved to its Spark job."""
    import re

    return prefix + re.sub(r"[^A-Za-z0-9]", "_", conn_id).upper()


def _jar_list(kind: str) -> list[Path]:
    folder = jars_dir() / kind
    jars = sorted(folder.glob("*.jar"))
    if not jars:
        raise MissingJarsError(
            f"no jars in {folder}: run `make jars` (Maven resolves them from Maven Central "
            f"through jvm/pom.xml, profile '{kind}'), or set KAFKA_RECON_JARS")
    return jars


def kafka_classpath() -> str:
    """Classpath of the Kafka broker and its tools."""
    return os.pathsep.join(str(j) for j in _jar_list("kafka"))


# kafka-recon's window reader (jvm/src), compiled by `make reader` against the pinned Spark's
# jars and shipped in the wheel beside the Kafka client and JDBC drivers
READER_JAR = "kafka-recon-reader.jar"


def lake_jars() -> list[str]:
    """Iceberg's Spark runtime and Delta Lake (`<jars>/lake/`: too large for the wheel, `make
    jars` fetches them), for flows with `table` tiers."""
    return [str(j) for j in _jar_list("lake")]


def spark_jars(lake: bool = False, objects: bool | None = None) -> list[str]:
    """Local jars for Spark: the window reader, the Kafka client, the JDBC drivers (never
    --packages); with `objects` (a run folder in an object store; by default, whether the runs
    root is in one), Hadoop's S3A connector too (`<jars>/s3/`: too large for the wheel, `make
    jars` fetches it); with `lake`, Iceberg's and Delta's."""
    folder = spark_jars_dir()
    jars = sorted(folder.glob("*.jar"))
    if not any(j.name == READER_JAR for j in jars):
        raise MissingJarsError(
            f"no {READER_JAR} in {folder}: the wheel ships it; in a checkout run `make reader` "
            "(javac compiles the window reader from jvm/src against the installed PySpark's "
            "jars), or set KAFKA_RECON_SPARK_JARS to a folder holding it and the Kafka client")
    if objects is None:
        objects = runs_remote()
    return [str(j) for j in jars] + (object_store_jars() if objects else []
                                     ) + (lake_jars() if lake else [])


def admin_command() -> list[str]:
    """The command that runs a class of kafka-recon's jar with the Kafka client beside it (the
    Admin API calls confluent-kafka lacks, `kafka_recon.cluster.transactions`): the Java of
    JAVA_HOME, else the one on the PATH; the Kafka client's logging API from PySpark's jars."""
    import shutil

    import pyspark

    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        raise MissingJarsError("java not found: set JAVA_HOME or put a JDK 17 on the PATH "
                               "(Spark needs one too)")
    ours = [j for j in spark_jars() if "kafka-clients" in j or j.endswith(READER_JAR)]
    logging = sorted((Path(pyspark.__file__).parent / "jars").glob("slf4j-api-*.jar"))
    return [java, "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Xmx128m", "-cp",
            os.pathsep.join([*ours, *map(str, logging)])]


def object_store_jars() -> list[str]:
    """Hadoop's S3A connector and the AWS SDK (`<jars>/s3/`), for run folders in S3."""
    return [str(j) for j in _jar_list("s3")]


def lineage_jars() -> list[str]:
    """The OpenLineage Spark listener, added to Spark's jars only when lineage is configured."""
    return [str(j) for j in _jar_list("lineage")]


def mirror_classpath() -> str:
    """Classpath of MirrorMaker 2 in dedicated mode (the drill's replication scenarios)."""
    return os.pathsep.join(str(j) for j in _jar_list("mirror"))


def connect_classpath() -> str:
    """Classpath of a Kafka Connect distributed worker (the connector scenarios' tests and
    drill); its connectors are plugins under `<jars>/connect-plugins/`."""
    return os.pathsep.join(str(j) for j in _jar_list("connect"))


def connect_plugins() -> Path:
    """Kafka Connect's plugin.path: one folder per connector plugin (Debezium's PostgreSQL
    source, from `make jars`)."""
    folder = jars_dir() / "connect-plugins"
    if not any(folder.glob("*/*.jar")):
        raise MissingJarsError(f"no connector plugins in {folder}: run `make jars` (profile "
                               "'debezium'), or set KAFKA_RECON_JARS")
    return folder


def flume_classpath() -> str:
    """Classpath of the Apache Flume agent (the drill's S10)."""
    return os.pathsep.join(str(j) for j in _jar_list("flume"))
