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
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from kafka_recon.config import Flow, KafkaTier, SqlTier, Tier
from kafka_recon.runfiles.base import Side
from kafka_recon.runfiles.repair import (
    DeliveredHop,
    RepairDelivery,
    RepairHop,
    RepairPlan,
    Source,
)
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
def _id_file(spark: SparkSession, path: str, schema: str) -> DataFrame:
    # an id file is RFC 4180 CSV: a quoted id may hold commas, quotes and line breaks
    return (spark.read.option("header", True).option("escape", '"').option("multiLine", True)
            .schema(schema).csv(path))


def _lost_ids(spark: SparkSession, folder: RunFolder, loss: Loss) -> DataFrame:
    return _id_file(spark, str(folder.inside(loss.ids_file)), "id STRING")


def _count_and_hash(df: DataFrame) -> tuple[int, str]:
    row = df.agg(F.count(F.lit(1)).alias("n"), content_hash(df).alias("h")).collect()[0]
    return int(row["n"]), str(row["h"])


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
         ) -> tuple[RepairHop, dict[str, Any]]:
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
    size = 0
    sample: list[str] = []
    if planned is not None:
        records_dir = f"{base}/records"
        target = folder.inside(records_dir)
        planned.write.mode("overwrite").parquet(str(target))  # re-planning replaces it
        written = spark.read.parquet(str(target))
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
    entry = RepairHop(hop=loss.hop, side=loss.side, source=source, from_tier=tier.name,
                      lost=loss.lost, records=0, uncovered=0, records_dir=records_dir,
                      uncovered_file=uncovered_file, bytes=size, sample_ids=sample)
    covered = _covered(spark, folder, entry)
    return entry.model_copy(update={"records": covered["records"],
                                    "uncovered": covered["uncovered"]}), covered


def _covered(spark: SparkSession, folder: RunFolder, hop: RepairHop) -> dict[str, Any]:
    """What the plan's digest covers of one hop: its files' row counts and content hashes,
    computed by the executors from the files as they are now."""
    out: dict[str, Any] = {"hop": hop.hop, "records": 0, "records_hash": "0"}
    if hop.records_dir:
        out["records"], out["records_hash"] = _count_and_hash(
            spark.read.parquet(str(folder.inside(hop.records_dir))))
    assert hop.uncovered_file
    out["uncovered"], out["uncovered_hash"] = _count_and_hash(_id_file(
        spark, str(folder.inside(hop.uncovered_file)), "id STRING, reason STRING"))
    return out


def _digest(result_digest: str, covered: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps({"result": result_digest, "hops": covered},
                                     sort_keys=True).encode()).hexdigest()


def verify(spark: SparkSession, folder: RunFolder, plan: RepairPlan, result_digest: str
           ) -> None:
    """UsageError unless the run folder holds exactly what the plan was made of and from."""
    from kafka_recon.errors import UsageError

    now = _digest(result_digest, [_covered(spark, folder, h) for h in plan.hops])
    if now != plan.digest:
        raise UsageError(f"{folder.file('repair_plan')}: plan {plan.digest[:12]} no longer "
                         f"matches the run folder (digest now {now[:12]}): the result or the "
                         "plan's files changed since it was made; plan again")


def make_plan(spark: SparkSession, flow: Flow, window: Window, folder: RunFolder,
              losses: list[Loss], result_digest: str) -> RepairPlan:
    """The window's repair plan, its files written and `repair/plan.json` last (a plan file
    is only ever there beside the files it names)."""
    remove(folder.inside(FILES["repair"]))
    hops: list[RepairHop] = []
    covered: list[dict[str, Any]] = []
    for loss in losses:
        entry, hashes = _hop(spark, flow, window, folder, loss)
        hops.append(entry)
        covered.append(hashes)
    digest = _digest(result_digest, covered)
    plan = RepairPlan(flow=flow.name, window_start=iso_z(window.start),
                      window_end=iso_z(window.end), made_at=iso_z(datetime.now(UTC)),
                      result_digest=result_digest, hops=hops, digest=digest)
    folder.write(plan)
    return plan


# ------------------------------------------------------------------ delivery
# the headers every re-delivered record carries: where it was in the flow's topic, and which
# plan sent it. They are also the ledger: a record is re-delivered once, whatever plans name it
H_FLOW, H_WINDOW, H_PLAN = "kafka-recon-flow", "kafka-recon-window", "kafka-recon-plan"
H_PARTITION, H_OFFSET, H_TIMESTAMP = ("kafka-recon-partition", "kafka-recon-offset",
                                      "kafka-recon-timestamp")


def repair_topic(tier: KafkaTier) -> str:
    """Where a topic's lost records are re-delivered: `<topic>.kafka-recon-repair`."""
    return f"{tier.topic}.kafka-recon-repair"


def _header(name: str) -> Column:
    return F.expr(f"cast(filter(headers, h -> h.key = '{name}')[0].value as string)")


def already_delivered(repaired: DataFrame, flow: str, window: str) -> DataFrame:
    """(partition, offset) in the flow's topic of every record a repair topic holds for this
    flow and window, from its committed records' headers; a record with other headers is
    someone else's and not counted (try_cast: a foreign header never fails the read)."""
    return (repaired.where((_header(H_FLOW) == flow) & (_header(H_WINDOW) == window))
            .select(_header(H_PARTITION).try_cast("int").alias("partition"),
                    _header(H_OFFSET).try_cast("long").alias("offset"))
            .where(F.col("partition").isNotNull() & F.col("offset").isNotNull())
            .distinct())


def _read_repair_topic(spark: SparkSession, options: dict[str, str], topic: str) -> DataFrame:
    # Spark's own Kafka source: it reads headers, which the window reader does not; only
    # committed transactions count
    return (spark.read.format("kafka").options(**options).option("subscribe", topic)
            .option("startingOffsets", "earliest").option("endingOffsets", "latest")
            .option("includeHeaders", "true").option("kafka.isolation.level", "read_committed")
            .load())


def _publisher(conf: dict[str, Any], topic: str, transactional_id: str, partitions: int,
               fixed: list[tuple[str, bytes]]) -> Any:
    """The function each executor task runs over its rows: one Kafka transaction per task,
    under a transactional id of its own. A retried task takes the same id, which fences the
    failed attempt and aborts what it had not committed: a task's records are published
    exactly once."""
    def publish(rows: Any) -> None:
        from confluent_kafka import Producer
        from pyspark import TaskContext

        first = next(rows, None)
        if first is None:
            return
        ctx = TaskContext.get()
        part = ctx.partitionId() if ctx is not None else 0
        producer = Producer({**conf, "transactional.id": f"{transactional_id}-{part}"})
        producer.init_transactions(60)
        producer.begin_transaction()
        for row in _chain(first, rows):
            headers = [*fixed, (H_PARTITION, str(row["partition"]).encode()),
                       (H_OFFSET, str(row["offset"]).encode()),
                       (H_TIMESTAMP, row["timestamp"].isoformat().encode())]
            # the record's own partition where the repair topic has it: a key keeps its order
            where = {"partition": row["partition"]} if row["partition"] < partitions else {}
            while True:
                try:
                    producer.produce(topic, key=_bytes(row["key"]), value=_bytes(row["value"]),
                                     headers=headers, **where)
                    break
                except BufferError:  # the local queue is full: let deliveries drain
                    producer.poll(0.5)
            producer.poll(0)
        producer.commit_transaction(120)

    return publish


def _bytes(value: Any) -> bytes | None:
    # Spark hands a binary column to Python as a bytearray, which the producer refuses
    return None if value is None else bytes(value)


def _chain(first: Any, rest: Any) -> Any:
    yield first
    yield from rest


def deliver(spark: SparkSession, flow: Flow, window: Window, folder: RunFolder,
            plan: RepairPlan, result_digest: str) -> RepairDelivery:
    """Publish the plan's consume-side records to each topic's repair topic, each at most
    once ever: what the repair topic already holds for this window (a delivery of this plan
    or of an earlier one, a delivery that crashed after some of its transactions committed)
    is not sent again. Refused when the run folder no longer matches the plan."""
    from kafka_recon.sources.kafka_client import endpoint
    from kafka_recon.sources.topic import check_topic, ensure_topic

    verify(spark, folder, plan, result_digest)
    key = f"{iso_z(window.start)}/{iso_z(window.end)}"  # the window, as headers name it
    tiers = {t.name: t for t in flow.tiers}
    out: list[DeliveredHop] = []
    for hop in plan.hops:
        tier = tiers[hop.from_tier]
        if hop.source != "topic" or not hop.records_dir or not isinstance(tier, KafkaTier):
            out.append(DeliveredHop(hop=hop.hop, note=(
                f"{hop.records} upstream row(s) in {hop.records_dir}: published only from "
                "a topic; hand them to the owners" if hop.records_dir else
                "no record could be read back")))
            continue
        ep = endpoint(tier)
        target = repair_topic(tier)
        parts = ensure_topic(ep, target, len(check_topic(ep, tier.topic)))
        planned = spark.read.parquet(str(folder.inside(hop.records_dir)))
        done = already_delivered(_read_repair_topic(spark, ep.spark_options(), target),
                                 flow.name, key)
        todo = planned.join(done, ["partition", "offset"], "left_anti")
        sent = todo.count()
        fixed = [(H_FLOW, flow.name.encode()), (H_WINDOW, key.encode()),
                 (H_PLAN, plan.digest.encode())]
        txid = f"kafka-recon-repair-{flow.name}-{plan.digest[:16]}-{hop.hop.replace('->', '__')}"
        todo.foreachPartition(_publisher(ep.librdkafka(), target, txid, parts, fixed))
        out.append(DeliveredHop(hop=hop.hop, target=target, sent=sent,
                                already=hop.records - sent))
    delivery = RepairDelivery(plan_digest=plan.digest, delivered_at=iso_z(datetime.now(UTC)),
                              hops=out)
    folder.write(delivery)
    return delivery
