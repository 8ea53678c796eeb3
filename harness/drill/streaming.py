"""The drill's streaming writer: a Spark Structured Streaming job (Spark's own Kafka source)
that loads the topic into a table, as a team's lakehouse ingestion does. It knows nothing of
kafka-recon.

    python -m harness.drill.streaming SPEC.json

Spec: bootstrap, topic, table (a folder), checkpoint (a folder), starting ("earliest" or
"latest": where a query without a checkpoint begins), per_batch (maxOffsetsPerTrigger),
format ("parquet": each micro-batch appended by foreachBatch, no transaction; "delta": Delta's
own streaming writer, one commit per batch, naming its query and epoch), hold (a batch
id: after writing that batch's files the job writes `marker` and waits, before its checkpoint
commits the batch: the window in which S21 kills it), marker, ledger (one line per batch:
`batch <id> <rows>`, after its write).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any


def main(spec_path: str) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from kafka_recon.config import DELTA_SPARK
    from kafka_recon.settings import spark_jars

    spec: dict[str, Any] = json.loads(Path(spec_path).read_text())
    delta = spec.get("format", "parquet") == "delta"
    builder = (SparkSession.builder.master("local[2]").appName("drill streaming writer")
               .config("spark.jars", ",".join(spark_jars(lake=delta)))
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.ui.enabled", "false"))
    for key, value in DELTA_SPARK.items() if delta else ():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    source = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", spec["bootstrap"])
              .option("subscribe", spec["topic"])
              .option("startingOffsets", spec.get("starting", "earliest"))
              .option("maxOffsetsPerTrigger", str(spec.get("per_batch", 200)))
              .option("failOnDataLoss", "false").load())
    fields = F.from_json(F.col("value").cast("string"), "id long, ts string")
    rows = source.select(fields["id"].alias("id"),
                         F.to_timestamp(fields["ts"]).alias("ts"),
                         "partition", "offset")
    hold, marker = spec.get("hold"), Path(spec.get("marker", "/nonexistent"))
    ledger = Path(spec["ledger"])

    def write(batch: Any, batch_id: int) -> None:
        batch.write.mode("append").parquet(spec["table"])
        with ledger.open("a") as fh:
            fh.write(f"batch {batch_id} {batch.count()}\n")
        if batch_id == hold and not marker.exists():
            marker.write_text(str(batch_id))
            time.sleep(600)  # killed here: the files are written, the batch not committed

    if delta:
        query = (rows.writeStream.format("delta").outputMode("append")
                 .option("checkpointLocation", spec["checkpoint"])
                 .trigger(processingTime="1 second").start(spec["table"]))
    else:
        query = (rows.writeStream.foreachBatch(write)
                 .option("checkpointLocation", spec["checkpoint"])
                 .trigger(processingTime="1 second").start())
    query.awaitTermination()


if __name__ == "__main__":
    main(sys.argv[1])
