"""The user macros a reconciliation DAG's templates call: each does its I/O when a task renders,
never when the DAG file is parsed."""

from __future__ import annotations


def spark_jars_csv() -> str:
    """A user macro, the Spark jars as spark-submit takes them (comma-separated): listing
    .jars is I/O, so it happens when a task renders, not at parse."""
    from kafka_recon.settings import spark_jars as jars

    return ",".join(jars())


def closing_time(flow: str, end: str, config: str) -> str:
    """A user macro: the closing time of the window ending at `end` (ISO 8601), read from the
    flow config when the wait renders, so the wait follows the config the run will use."""
    from kafka_recon.config import load_flow
    from kafka_recon.window import iso_z, parse_instant

    return iso_z(parse_instant(end, "window end") + load_flow(config, flow).closing)


def settled_at(flow: str, config: str) -> str:
    """A user macro: when a repair delivered now has had the flow's `repair.settle` to be
    loaded by the sink (ISO 8601), read from the flow config when the wait renders."""
    from datetime import UTC, datetime

    from kafka_recon.config import load_flow
    from kafka_recon.window import iso_z

    return iso_z(datetime.now(UTC) + load_flow(config, flow).repair.settle)


# the macros a reconciliation DAG's templates call
MACROS = {"kafka_recon_spark_jars": spark_jars_csv, "kafka_recon_closing_time": closing_time,
          "kafka_recon_settled_at": settled_at}
