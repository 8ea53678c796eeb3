"""Lakehouse tables written as a streaming job's sink would leave them: an Iceberg table of a
Hadoop catalog (partitioned by day of its event time) and a Delta table, by a Spark of their
own (Delta needs its session settings from the start), in a process of its own.

    python -m harness.lake SPEC.json

SPEC: {"iceberg": {"warehouse", "table", "batches"}, "delta": {"path", "batches"}}, each
batch a list of [id, "YYYY-MM-DD HH:MM:SS"] rows appended as one commit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from kafka_recon.config import DELTA_SPARK
from kafka_recon.settings import lake_jars


def write(spec: dict[str, Any], work: Path) -> None:
    """Write the tables of `spec` in a child process (its own Spark)."""
    path = work / "lake-spec.json"
    path.write_text(json.dumps(spec))
    done = subprocess.run([sys.executable, "-m", "harness.lake", str(path)], capture_output=True,
                          text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"harness.lake failed: {done.stderr[-3000:]}")


def main(spec_path: str) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spec = json.loads(Path(spec_path).read_text())
    builder = (SparkSession.builder.master("local[2]").appName("harness lake writer")
               .config("spark.jars", ",".join(lake_jars()))
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.enabled", "false"))
    for key, value in DELTA_SPARK.items():
        builder = builder.config(key, value)
    ice = spec.get("iceberg")
    if ice:
        c = "spark.sql.catalog.lake"
        builder = (builder.config(c, "org.apache.iceberg.spark.SparkCatalog")
                   .config(f"{c}.type", "hadoop").config(f"{c}.warehouse", ice["warehouse"]))
    spark = builder.getOrCreate()

    def frame(rows: list[list[Any]]) -> Any:
        return (spark.createDataFrame([(int(i), t) for i, t in rows], "id long, ts string")
                .select("id", F.to_timestamp("ts").alias("event_time")))

    if ice:
        spark.sql(f"CREATE TABLE {ice['table']} (id bigint, event_time timestamp) USING iceberg "
                  "PARTITIONED BY (days(event_time))")
        for batch in ice["batches"]:
            frame(batch).writeTo(ice["table"]).append()
    delta = spec.get("delta")
    if delta:
        for batch in delta["batches"]:
            frame(batch).write.format("delta").mode("append").save(delta["path"])
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
