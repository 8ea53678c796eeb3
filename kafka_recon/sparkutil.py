"""The SparkSession every kafka-recon job uses, under spark-submit or in process."""

from __future__ import annotations

import json
from argparse import ArgumentParser, Namespace
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Every time is UTC: the window, Kafka timestamps and naive database timestamps alike.
UTC_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
    "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
}


# Spark's 200 shuffle partitions cost more than they help on a window's ids; adaptive execution
# still coalesces or splits them as the data asks.
SMALL_DATA_CONF = {
    "spark.sql.shuffle.partitions": "8",
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


def window_job_parser(prog: str, description: str, out_help: str) -> ArgumentParser:
    """The arguments every window job takes: which flow, which window, which run folder."""
    p = ArgumentParser(prog=prog, description=description)
    p.add_argument("--config", required=True, type=Path, help="flow config YAML")
    p.add_argument("--flow", required=True, help="flow name in the config")
    p.add_argument("--start", required=True, help="window start, ISO 8601")
    p.add_argument("--end", required=True, help="window end, ISO 8601")
    p.add_argument("--out", required=True, type=Path, help=out_help)
    return p


def submit_main(step: str, args: Namespace, run: Callable[[SparkSession, Namespace], Any],
                summary: Callable[[Any], Any]) -> int:
    """A spark-submit job's main: one session, the step, a one-line summary for the log."""
    spark = session(f"kafka-recon {step} {args.flow}")
    try:
        out = run(spark, args)
    finally:
        spark.stop()
    print(json.dumps(summary(out)))
    return 0
