"""The SparkSession every kafka-recon job uses, under spark-submit or in process."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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


def session(app: str, master: str | None = None, jars: list[str] | None = None) -> SparkSession:
    """getOrCreate with kafka-recon's settings; master and jars only when run in process."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app)
    if master:
        builder = builder.master(master)
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    for key, value in {**UTC_CONF, **SMALL_DATA_CONF}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
