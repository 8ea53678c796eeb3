"""What kafka-recon tells Spark: what it must (UTC), what it would like (its measured defaults,
each overridden by the cluster's own settings), the driver's JVM options and the Spark Connect
port. No pyspark here: Airflow's operator reads these when its task runs, and the command line
when it starts a server; `kafka_recon.spark.session` applies the defaults inside the job."""

from __future__ import annotations

import shlex
from pathlib import Path

from kafka_recon.settings import jvm_options

# Every time is UTC: the window, Kafka timestamps and naive database timestamps alike. JDBC
# reads naive timestamps in the JVM's own zone, whatever the session's.
UTC_JVM = "-Duser.timezone=UTC"


# kafka-recon's choices, each a default the cluster overrides (`spark-defaults.conf`, the Spark
# connection's extra `conf`, a flow's `spark:` block): set only where none of them sets the key.
# Adaptive execution is off: it re-plans each shuffle as a job of its own (51 jobs a run instead
# of 19) and the bench measured it slower on a window's ids (bench/tune.json,
# docs/performance-history.md). The shuffle partitions follow the window's size
# (`shuffle_partitions`).
DEFAULTS = {"spark.sql.adaptive.enabled": "false"}
STARTUP_DEFAULTS = {"spark.ui.showConsoleProgress": "false"}  # read only when Spark starts
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
# 8 partitions were fastest for 1M records on 2 cores (bench/tune.json): 125k records each
RECORDS_PER_PARTITION = 125_000
JAVA_OPTIONS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")


# A small window's partitions each cost a task per shuffle for little work: below two per core,
# one per this many records. At 10k records one partition took the reconcile 3.6-4.0 s through
# a warm server against 4.3-5.2 s with four (docs/performance-history.md, "A small window's
# seconds").
SMALL_PARTITION = 25_000


def shuffle_partitions(records: int | None, cores: int) -> int:
    """Spark's 200 cost more than they help on a small window and too few spill on a large one:
    one partition per 125k records, at most 4000; at least two per core, but no more than one
    per 25k records for a window of known size (a window of unknown size: two per core)."""
    least = max(2, 2 * cores)
    if not records:
        return least
    least = min(least, max(1, -(-records // SMALL_PARTITION)))
    return min(4000, max(least, -(-records // RECORDS_PER_PARTITION)))


# The driver's heap, fixed (-Xms as -Xmx) and chosen by the window's size, where nobody chose
# one. The shuffles are cut into partitions of RECORDS_PER_PARTITION records, so a task's work
# does not grow with the window, and what a run caches spills to local disk beyond Spark's
# region of the heap: one heap serves every large window. A small window's few partitions need
# less, so a host running many small flows at once gives each less. Fixed, not grown as the
# collector sees fit: a run's memory is known before it starts, whatever the window holds.
DRIVER_MEMORY = "spark.driver.memory"
SMALL_WINDOW = 500_000  # records
HEAPS = {"small": "768m", "large": "1g"}


def driver_heap(records: int) -> str:
    """The driver's heap for a window of `records` records (the largest of its tiers)."""
    return HEAPS["small" if records <= SMALL_WINDOW else "large"]


def cluster_defaults() -> dict[str, str]:
    """The settings of this host's Spark, `spark-defaults.conf` in `SPARK_CONF_DIR` or
    `$SPARK_HOME/conf`: what spark-submit applies under every `--conf`."""
    import os

    where = os.environ.get("SPARK_CONF_DIR") or (
        f"{os.environ['SPARK_HOME']}/conf" if os.environ.get("SPARK_HOME") else "")
    path = Path(where) / "spark-defaults.conf" if where else None
    if path is None or not path.is_file():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        parts = line.strip().split(None, 1)
        if parts and not parts[0].startswith("#"):
            out[parts[0]] = parts[1].strip() if len(parts) > 1 else ""
    return out


def spark_conf(given: dict[str, str] | None = None,
               cluster: dict[str, str] | None = None,
               records: int | None = None) -> dict[str, str]:
    """What kafka-recon puts on a Spark application's command line (or its in-process builder):
    `given` (the Spark connection's extra `conf`, then the flow's `spark:` block, which wins),
    and UTC, which nothing overrides. The JVMs' options are whoever set them (`given`, else the
    cluster's `spark-defaults.conf`), else kafka-recon's measured ones (`settings.jvm_options`),
    always with the UTC time zone added. The rest of kafka-recon's choices (`DEFAULTS`, the
    shuffle partitions) are not here: the job sets each only where nobody did (`apply_defaults`).

    Why those JVM options: a run is short (35-40 s at 1M here), and every Spark job
    brings freshly generated classes that the JIT compiles again once hot, on the cores the
    tasks need. How long the JVM waits before compiling (`CompileThresholdScaling`) was
    measured twice: at x10 the compiler threads of a 1M run used half the CPU they did at the
    defaults (2026-11-23, when a run took a minute); once runs were shorter (the window reader,
    the class archive), code left interpreted that long cost more than the compiling saved,
    and x3 was the fastest and leanest: 35.2 s and 59.5 CPU s at 1M against 39.3 s and 62.6
    at x10 and 36.4 s and 63.6 at the defaults (bench/tune-jit.json, and at 5M
    bench/tune-jit-5m.json; docs/performance-history.md, "The JVM's compiler, measured again"). The
    throughput collector spent less than G1 (bench/tune-jvm.json). A window of known size up
    to `settings.SMALL_JIT_WINDOW` records is too short for the compiler's second tier to pay:
    with the first tier only a run took 0.70 x the time at 100k records (median 45.6 s against
    65.5) and 0.87 x at 500k (82.5 against 95.2), 2026-11-27 (bench/tune-jit-100k.json and
    bench/tune-jit-500k.json; docs/performance-history.md, "The JVM's compiler for small windows").
    """
    given = dict(given or {})
    cluster = cluster_defaults() if cluster is None else cluster
    out = {**given, "spark.sql.session.timeZone": "UTC"}
    for key in JAVA_OPTIONS:
        theirs = given.get(key, cluster.get(key))
        base = (theirs if theirs is not None else jvm_options(records)).strip()
        out[key] = base if UTC_JVM in base.split() else f"{UTC_JVM} {base}".strip()
    for key, value in STARTUP_DEFAULTS.items():
        if key not in given and key not in cluster:
            out[key] = value
    if records is not None and DRIVER_MEMORY not in given and DRIVER_MEMORY not in cluster:
        # a driver of a window of known size: its heap fixed (DRIVER_MEMORY's note), unless
        # the driver's own options already set where its heap starts
        heap = driver_heap(records)
        out[DRIVER_MEMORY] = heap
        driver = out[JAVA_OPTIONS[0]]
        if not any(o.startswith("-Xms") for o in driver.split()):
            out[JAVA_OPTIONS[0]] = f"{driver} -Xms{heap}"
    return out


# a class archive that does not fit is dropped without a word on stderr, run after run
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def archive_options(archive: Path | None) -> str:
    """The driver JVM's options that map the class archive (`kafka_recon.spark.classes`),
    when it was made."""
    if archive is None or not archive.is_file():
        return ""
    return f"-XX:SharedArchiveFile={shlex.quote(str(archive))} {QUIET}"


def driver_conf(conf: dict[str, str], options: str) -> dict[str, str]:
    """`conf` with `options` added to the driver JVM's own."""
    key = "spark.driver.extraJavaOptions"
    return {**conf, key: f"{conf.get(key, '')} {options}".strip()} if options.strip() else conf

def session_conf() -> dict[str, str]:
    """What a session of a Spark Connect server sets for itself: UTC; the rest is the server's."""
    return {"spark.sql.session.timeZone": "UTC"}


CONNECT_PORT = 15002  # Spark Connect's own, where a URL names none
