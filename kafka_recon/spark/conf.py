"""What kafka-recon tells Spark, apart from Spark itself: its settings, the driver's JVM options
and the Spark Connect port. No pyspark here: Airflow's operator renders these when a DAG file is
parsed, and the command line when it starts a server."""

from __future__ import annotations

import shlex
from pathlib import Path

from kafka_recon.settings import jvm_options

# Every time is UTC: the window, Kafka timestamps and naive database timestamps alike.
UTC_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
    "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
}


# Spark's 200 shuffle partitions cost more than they help on a window's ids. Adaptive execution
# is off: it re-plans each shuffle as a job of its own (51 jobs a run instead of 19) and the
# bench measured it slower here (bench/tune.json, docs/performance.md).
SMALL_DATA_CONF = {
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}


def spark_conf() -> dict[str, str]:
    """Every setting kafka-recon gives its Spark applications, in process or under
    spark-submit: UTC, small-data shuffles, and the JVMs' options (`settings.jvm_options`).

    Why those JVM options: a run is short (35-40 s at 1M here), and every Spark job
    brings freshly generated classes that the JIT compiles again once hot, on the cores the
    tasks need. How long the JVM waits before compiling (`CompileThresholdScaling`) was
    measured twice: at x10 the compiler threads of a 1M run used half the CPU they did at the
    defaults (2026-11-23, when a run took a minute); once runs were shorter (the window reader,
    the class archive), code left interpreted that long cost more than the compiling saved,
    and x3 was the fastest and leanest: 35.2 s and 59.5 CPU s at 1M against 39.3 s and 62.6
    at x10 and 36.4 s and 63.6 at the defaults (bench/tune-jit.json, and at 5M
    bench/tune-jit-5m.json; docs/performance.md, "The JVM's compiler, measured again"). The
    throughput collector spent less than G1 (bench/tune-jvm.json).
    """
    extra = jvm_options()
    java = {k: f"{v} {extra}".strip() for k, v in UTC_CONF.items() if k.endswith("JavaOptions")}
    return {**UTC_CONF, **java, **SMALL_DATA_CONF}


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
    """The settings a session sets for itself; the rest (JVM options, jars) are its Spark's."""
    return {k: v for k, v in spark_conf().items() if k.startswith("spark.sql.")}


CONNECT_PORT = 15002  # Spark Connect's own, where a URL names none

# what remote_session checks of a server's JVMs (UTC_CONF): JDBC reads naive timestamps in the
# JVM's own zone, whatever the session's
UTC_JVM = "-Duser.timezone=UTC"
