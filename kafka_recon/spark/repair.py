"""The repair plan: each lost id of a run read back from where it still is, by the executors.

A consume-side loss (the records reached a topic, not the tier after it) is read back from the
topic at the records' partitions and offsets, whole (key, value, timestamp); a write-side loss
(the upstream has rows the topic lacks) from the upstream's id query, restricted to the lost
ids. What cannot be read back is listed with the reason. Everything is written into the run
folder's `repair/` by the executors; the driver only gets counts, ten sample ids and sums of
hashes for the plan's digest (`kafka_recon.runfiles.repair`).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from kafka_recon.config import Flow, KafkaTier, SqlTier, Tier
from kafka_recon.runfiles.base import Side
from kafka_recon.runfiles.repair import RepairHop, RepairPlan, Source
from kafka_recon.runfolder import FILES, RunFolder, remove
from kafka_recon.spark.idfiles import IdFile, id_rows, write_id_files
from kafka_recon.spark.records import normalise_id
from kafka_recon.spark.replay import hash_sum
from kafka_recon.window import Window, iso_z

SAMPLE = 10


@dataclass(frozen=True)
class Loss:
    """One loss finding to plan for: its hop, side, the tier before the hop and its ids file
    (a run-folder path)."""

    hop: str
    side: Side
    from_tier: Tier
    ids_file: str
    lost: int


# ------------------------------------------------------------------ pure transforms
def topic_rows(raw: DataFrame, records: DataFrame, lost: DataFrame) -> DataFrame:
    """The Kafka rows of the lost ids: every copy the window holds, as it was written."""
    at = (records.where(F.col("id").isNotNull()).join(lost, "id", "left_semi")
          .select("id", "partition", "offset"))
    return (raw.join(at, ["partition", "offset"])
            .select("id", "partition", "offset", "timestamp", "key", "value"))


def upstream_rows(rows: DataFrame, lost: DataFrame) -> DataFrame:
    """The upstream rows of the lost ids, every column the id query returns."""
    keyed = rows.withColumn("kafka_recon_id", normalise_id(F.col("kafka_recon_id")))
    return keyed.join(lost.withColumnRenamed("id", "kafka_recon_id"), "kafka_recon_id",
                      "left_semi")


def uncovered(lost: DataFrame, planned: DataFrame, reason: str) -> DataFrame:
    """The lost ids the plan holds no record of, each with why."""
    return lost.join(planned, "id", "left_anti").select("id", F.lit(reason).alias("reason"))


def content_hash(df: DataFrame) -> Column:
    """The sum of every row's 64-bit hash, exact: what the plan's digest covers of a file."""
    return hash_sum(F.xxhash64(*[F.col(c) for c in df.columns]))


# ------------------------------------------------------------------ I/O
def _lost_ids(spark: SparkSession, folder: RunFolder, loss: Loss) -> DataFrame:
    # an id file is RFC 4180 CSV: a quoted id may hold commas, quotes and line breaks
    return (spark.read.option("header", True).option("escape", '"').option("multiLine", True)
            .schema("id STRING").csv(str(folder.inside(loss.ids_file))))


def _from_topic(spark: SparkSession, flow: Flow, tier: KafkaTier, window: Window,
                lost: DataFrame) -> DataFrame:
    from kafka_recon.sources.kafka_client import endpoint
    from kafka_recon.sources.topic import GROUP_PREFIX
    from kafka_recon.spark.replay import (
        extract_records,
        read_ranges,
        read_window,
        window_schemas,
    )

    ep = endpoint(tier)
    ranges = read_ranges(ep, flow, tier, window)
    record = flow.record_of(tier)
    schemas = window_schemas(spark, ep, tier, record, ranges)

    def read() -> DataFrame:
        group = f"{GROUP_PREFIX}{flow.name}-repair-{uuid.uuid4().hex[:12]}"
        return read_window(spark, ep, tier.topic, ranges, group, tier.isolation_level)

    # two reads of the same fixed offsets: one for the ids, one for the rows as written
    return topic_rows(read(), extract_records(read(), record, schemas), lost)


def _from_upstream(spark: SparkSession, tier: SqlTier, window: Window,
                   lost: DataFrame) -> DataFrame:
    from kafka_recon.sources.jdbc import read_rows
    from kafka_recon.spark.read import JDBC_SLICES

    return upstream_rows(read_rows(spark, tier, window, JDBC_SLICES), lost)


def _hop(spark: SparkSession, flow: Flow, window: Window, folder: RunFolder, loss: Loss
         ) -> tuple[RepairHop, dict[str, str]]:
    """One hop's records and uncovered ids, written; its entry and what its digest covers."""
    name = loss.hop.replace("->", "__")
    base = f"{FILES['repair']}/{name}"
    lost = _lost_ids(spark, folder, loss)
    source: Source
    tier = loss.from_tier
    if isinstance(tier, KafkaTier):
        source, key = "topic", "id"
        planned = _from_topic(spark, flow, tier, window, lost)
        why = (f"not in topic '{tier.topic}' over the window now: deleted by retention (or "
               "compaction) since the run, or never written to it")
    elif isinstance(tier, SqlTier) and tier.ids is not None:
        source, key = "upstream", "kafka_recon_id"
        planned = _from_upstream(spark, tier, window, lost)
        why = f"tier '{tier.name}' has no row with this id in the window now"
    else:
        source, key, planned = "none", "id", None
        why = f"tier '{tier.name}' ({tier.type}): kafka-recon cannot read its records back"
    records_dir = None
    hashes: dict[str, str] = {}
    found = 0
    size = 0
    sample: list[str] = []
    if planned is not None:
        records_dir = f"{base}/records"
        target = folder.inside(records_dir)
        planned.write.mode("overwrite").parquet(str(target))  # re-planning replaces it
        written = spark.read.parquet(str(target))
        row = written.agg(F.count(F.lit(1)).alias("n"),
                          content_hash(written).alias("h")).collect()[0]
        found, hashes["records"] = int(row["n"]), str(row["h"])
        sample = [r[0] for r in written.select(F.col(key).alias("id")).distinct()
                  .orderBy("id").limit(SAMPLE).collect()]
        size = sum(p.stat().st_size for p in target.iterdir() if p.name.endswith(".parquet"))
        gaps = uncovered(lost, written.select(F.col(key).alias("id")).distinct(), why)
    else:
        gaps = lost.select("id", F.lit(why).alias("reason"))
    uncovered_file = f"{base}/uncovered.csv"
    write_id_files(spark, [IdFile(folder.inside(uncovered_file), ("id", "reason"),
                                  id_rows(gaps, ["id", "reason"], "id"))],
                   folder.inside(f"{base}/.parts"))
    counted = spark.read.option("header", True).option("escape", '"') \
        .option("multiLine", True).schema("id STRING, reason STRING") \
        .csv(str(folder.inside(uncovered_file)))
    row = counted.agg(F.count(F.lit(1)).alias("n"), content_hash(counted).alias("h")).collect()[0]
    hashes["uncovered"] = str(row["h"])
    return RepairHop(hop=loss.hop, side=loss.side, source=source, from_tier=tier.name,
                     lost=loss.lost, records=found, uncovered=int(row["n"]),
                     records_dir=records_dir, uncovered_file=uncovered_file, bytes=size,
                     sample_ids=sample), hashes


def make_plan(spark: SparkSession, flow: Flow, window: Window, folder: RunFolder,
              losses: list[Loss], result_digest: str) -> RepairPlan:
    """The window's repair plan, its files written and `repair/plan.json` last (a plan file
    is only ever there beside the files it names)."""
    remove(folder.inside(FILES["repair"]))
    hops: list[RepairHop] = []
    covered: list[dict[str, object]] = []
    for loss in losses:
        entry, hashes = _hop(spark, flow, window, folder, loss)
        hops.append(entry)
        covered.append({"hop": entry.hop, "records": entry.records,
                        "uncovered": entry.uncovered, **hashes})
    digest = hashlib.sha256(json.dumps({"result": result_digest, "hops": covered},
                                       sort_keys=True).encode()).hexdigest()
    plan = RepairPlan(flow=flow.name, window_start=iso_z(window.start),
                      window_end=iso_z(window.end), made_at=iso_z(datetime.now(UTC)),
                      result_digest=result_digest, hops=hops, digest=digest)
    folder.write(plan)
    return plan
