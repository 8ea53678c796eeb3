"""The repair plan: each lost id of a run read back from where it still is, by the executors.

A consume-side loss (the records reached a topic, not the tier after it) is read back from the
topic at the records' partitions and offsets, whole (key, value, timestamp, headers); a
write-side loss (the upstream has rows the topic lacks) from the upstream's id query,
restricted to the lost ids. What cannot be read back is listed with the reason. Everything is
written into the run folder's `repair/` by the executors; the driver only gets counts, ten
sample ids and sums of hashes for the plan's digest (`kafka_recon.runfiles.repair`).
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
from pyspark.sql.types import StringType

from kafka_recon.config import Flow, KafkaTier, RecordSpec, SqlTier, Tier
from kafka_recon.runfiles.base import Side
from kafka_recon.runfiles.repair import (
    DeliveredHop,
    RepairDelivery,
    RepairHop,
    RepairPlan,
    Source,
)
from kafka_recon.runfolder import FILES, RunFolder, remove
from kafka_recon.spark.encode import encoded
from kafka_recon.spark.idfiles import IdFile, id_rows, write_id_files
from kafka_recon.spark.records import normalise_id
from kafka_recon.spark.repair_topic import (
    H_FLOW,
    H_ID,
    H_OFFSET,
    H_PARTITION,
    H_PLAN,
    H_TIMESTAMP,
    H_WINDOW,
    already_delivered,
    already_delivered_ids,
    copies_since,
    read_offsets,
    read_repair_topic,
    repair_topic,
)
from kafka_recon.spark.replay import hash_sum
from kafka_recon.spark.session import release
from kafka_recon.window import Window, iso_z

SAMPLE = 10
# a delivery publishes in this many Spark tasks, one transaction and transactional id each
PUBLISH_TASKS = 4


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
    """The Kafka rows of the lost ids: every copy the window holds, as it was written (with
    its headers)."""
    at = (records.where(F.col("id").isNotNull()).join(lost, "id", "left_semi")
          .select("id", "partition", "offset"))
    return (raw.join(at, ["partition", "offset"])
            .select("id", "partition", "offset", "timestamp", "key", "value", "headers"))


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


def _nested(fields: dict[str, Column]) -> Column:
    """One struct from JSON paths of plain names ("$.a", "$.b.c"), nested as the paths say."""
    tree: dict[str, Any] = {}
    for path, col in fields.items():
        *parents, leaf = path[2:].split(".")
        node = tree
        for name in parents:
            node = node.setdefault(name, {})
        node[leaf] = col

    def build(node: dict[str, Any]) -> Column:
        return F.struct(*[(build(v) if isinstance(v, dict) else v).alias(k)
                          for k, v in node.items()])

    return build(tree)


def _time_text(ts: Column, fmt: str) -> Column:
    """A timestamp written as the flow's record spec reads it (`records.event_time`)."""
    from kafka_recon.spark.records import EPOCH_UNITS

    if fmt == "iso8601":
        return F.date_format(ts, "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'")
    if fmt in EPOCH_UNITS:
        # whole units where the unit is finer than a second; seconds keep their fraction
        from decimal import Decimal

        scaled = F.unix_micros(ts).cast("decimal(38,9)") / F.lit(Decimal(EPOCH_UNITS[fmt]))
        return scaled.cast("decimal(38,6)") if fmt == "epoch_s" else scaled.cast("long")
    return F.date_format(ts, fmt)


def json_records(rows: DataFrame, record: RecordSpec, fields: dict[str, str]) -> DataFrame:
    """Upstream rows (`upstream_rows`) as the topic's JSON records: (id, key, value,
    event_time). The id and the event time sit where the record spec reads them; `fields`
    add the row's other columns by path. The key is the id's text."""
    from kafka_recon.spark.records import event_time

    rid = F.col("kafka_recon_id")
    when = event_time(F.col("event_time").cast("string"), "iso8601")
    paths = {path: F.col(column) for path, column in fields.items()}
    if record.id.startswith("$."):
        paths[record.id] = rid
    if record.event_time.startswith("$."):
        # an ISO 8601 time the upstream keeps as text goes as the upstream spells it (what
        # its own producer published, and what a sink comparing text expects); else written
        # in the record spec's format
        as_text = (record.event_time_format == "iso8601"
                   and isinstance(rows.schema["event_time"].dataType, StringType))
        paths[record.event_time] = F.col("event_time") if as_text \
            else _time_text(when, record.event_time_format)
    value = rid if record.id == "value" else F.to_json(_nested(paths))
    return rows.select(rid.alias("id"), rid.cast("binary").alias("key"),
                       value.cast("binary").alias("value"), when.alias("event_time"))


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
    from kafka_recon.sources.topic import GROUP_PREFIX, read_ranges
    from kafka_recon.spark.replay import (
        extract_records,
        read_window,
        window_schemas,
    )

    ep = endpoint(tier)
    ranges = read_ranges(ep, flow, tier, window)
    record = flow.record_of(tier)
    schemas = window_schemas(spark, ep, tier, record, ranges)

    group = f"{GROUP_PREFIX}{flow.name}-repair-{uuid.uuid4().hex[:12]}"
    ids = extract_records(read_window(spark, ep, tier.topic, ranges, group,
                                      tier.isolation_level), record, schemas)
    # two reads of the same fixed offsets: the ids as a run reads them, and the rows as
    # written with their headers (which the window reader does not read)
    raw = read_offsets(spark, ep.spark_options(), tier.topic,
                       [(r.partition, r.start, r.end) for r in ranges], tier.isolation_level)
    return topic_rows(raw, ids, lost)


def _from_upstream(spark: SparkSession, tier: SqlTier, window: Window,
                   lost: DataFrame) -> DataFrame:
    from kafka_recon.sources.jdbc import read_rows
    from kafka_recon.spark.read import jdbc_slices

    return upstream_rows(read_rows(spark, tier, window, jdbc_slices(tier)), lost)


def _hop_dir(hop: str) -> str:
    """A hop's folder in the run folder's `repair/`."""
    return f"{FILES['repair']}/{hop.replace('->', '__')}"


def _hop(spark: SparkSession, flow: Flow, window: Window, folder: RunFolder, loss: Loss
         ) -> tuple[RepairHop, dict[str, Any]]:
    """One hop's records and uncovered ids, written; its entry and what its digest covers."""
    base = _hop_dir(loss.hop)
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
        tier = _target(flow, entry)
        hops.append(entry.model_copy(update={
            "target": repair_topic(flow, tier) if tier is not None else None}))
        covered.append(hashes)
    digest = _digest(result_digest, covered)
    plan = RepairPlan(flow=flow.name, window_start=iso_z(window.start),
                      window_end=iso_z(window.end), made_at=iso_z(datetime.now(UTC)),
                      result_digest=result_digest, hops=hops, digest=digest)
    folder.write(plan)
    return plan


# ------------------------------------------------------------------ delivery
HEADERS = "array<struct<key:string,value:binary>>"  # as Spark's Kafka source reads them


def _headers(*pairs: tuple[str, Column]) -> Column:
    # kafka-recon's own headers, those with a value
    ours = F.array(*[F.struct(F.lit(k).alias("key"), v.cast("string").cast("binary")
                              .alias("value")) for k, v in pairs])
    return F.filter(ours, lambda h: h["value"].isNotNull())


def topic_copies(planned: DataFrame, partitions: int) -> DataFrame:
    """A topic's planned records as they are published: as written (key, value, their own
    headers), into the same partition where the repair topic has it (a key keeps its order),
    with headers saying where they were. A header of kafka-recon's own that the original
    carried is not copied: the ledger reads only the copy's."""
    stamp = F.date_format("timestamp", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")
    none = F.array().cast(HEADERS)
    # null for a record written without headers (and no column in a plan made before them)
    original = F.coalesce(F.col("headers"), none) if "headers" in planned.columns else none
    kept = F.filter(original, lambda h: ~h["key"].startswith("kafka-recon-"))
    return planned.select(
        "id", "key", "value",
        F.when(F.col("partition") < partitions, F.col("partition")).alias("target"),
        F.lit(None).cast("long").alias("ts_ms"),
        F.concat(kept, _headers((H_PARTITION, F.col("partition")),
                                (H_OFFSET, F.col("offset")),
                                (H_TIMESTAMP, stamp))).cast(HEADERS).alias("headers"))


def upstream_copies(records: DataFrame, record: RecordSpec) -> DataFrame:
    """Write-side JSON records (`json_records`) as they are published: partitioned by key,
    with their upstream id; their Kafka timestamp is the event time when that is where the
    record spec reads it."""
    ms = (F.unix_micros("event_time") / 1000).cast("long")
    stamp = F.date_format("event_time", "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'")
    return records.select(
        "id", "key", "value", F.lit(None).cast("int").alias("target"),
        (ms if record.event_time == "kafka_timestamp" else F.lit(None).cast("long"))
        .alias("ts_ms"),
        _headers((H_ID, F.col("id")), (H_TIMESTAMP, stamp)).cast(HEADERS).alias("headers"))


def _publisher(conf: dict[str, Any], topic: str, transactional_id: str,
               fixed: list[tuple[str, bytes]]) -> Any:
    """The function each executor task runs over its rows (`topic_copies`,
    `upstream_copies`): one Kafka transaction per task, under a transactional id of its own.
    A retried task takes the same id, which fences the failed attempt and aborts what it had
    not committed: a task's records are published exactly once."""
    def publish(rows: Any) -> None:
        from confluent_kafka import Producer
        from pyspark import TaskContext

        ctx = TaskContext.get()
        part = ctx.partitionId() if ctx is not None else 0
        producer = Producer({**conf, "transactional.id": f"{transactional_id}-{part}"})
        # first, even with nothing to send: it fences the same task of a delivery killed
        # mid-way and aborts the transaction that one left open
        producer.init_transactions(60)
        first = next(rows, None)
        if first is None:
            return
        producer.begin_transaction()
        for row in _chain(first, rows):
            headers: list[tuple[str, str | bytes | None]] = [
                *fixed, *((str(h["key"]), _bytes(h["value"])) for h in row["headers"])]
            where: dict[str, Any] = {}
            if row["target"] is not None:
                where["partition"] = row["target"]
            if row["ts_ms"] is not None:
                where["timestamp"] = row["ts_ms"]
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


def _not_published(hop: RepairHop) -> str:
    if not hop.records_dir:
        return "no record could be read back"
    if hop.source == "upstream":
        return (f"{hop.records} upstream row(s) kept in {hop.records_dir} for the owners "
                "(repair.write_side: export)")
    return f"{hop.records} record(s) in {hop.records_dir}: nowhere to publish them"


def _target(flow: Flow, hop: RepairHop) -> KafkaTier | None:
    """The topic tier whose repair topic a hop is published to; None when it is not."""
    points = {p.name: p.tier for p in flow.points}
    src, dst = (points[n] for n in hop.hop.split("->"))
    if hop.records_dir and hop.source == "topic" and isinstance(src, KafkaTier):
        return src
    if (hop.records_dir and hop.source == "upstream" and isinstance(dst, KafkaTier)
            and flow.repair.write_side == "publish"):
        return dst
    return None


def _write_schema(flow: Flow, tier: KafkaTier) -> tuple[str | None, int | None]:
    """(schema text, registry schema id) a write-side hop's values are written with: none
    for JSON, the record's schema file for plain Avro, else the latest schema of the topic's
    value subject. ConfigError naming every field the schema requires and nothing fills."""
    from pathlib import Path

    from kafka_recon.errors import ConfigError
    from kafka_recon.sources import registry
    from kafka_recon.sources.kafka_client import endpoint
    from kafka_recon.spark.encode import unfilled

    record = flow.record_of(tier)
    if record.format == "json":
        return None, None
    if record.schema_file:
        text, sid, which = Path(record.schema_file).read_text(), None, record.schema_file
    else:
        subject = f"{tier.topic}-value"
        sid, text = registry.latest(endpoint(tier).registry_conf(tier.schema_registry),
                                    subject, record.format)
        which = f"schema id {sid} (subject {subject})"
    paths = [p for p in (record.id, record.event_time) if p.startswith("$.")]
    gaps = unfilled(text, record.format, [*paths, *flow.repair.fields])
    if gaps:
        raise ConfigError(f"flow '{flow.name}': repair.write_side publish cannot write "
                          f"{which}: {'; '.join(gaps)}; map each in repair.fields (a "
                          "column of the id query), or use write_side export")
    return text, sid


def deliver(spark: SparkSession, flow: Flow, window: Window, folder: RunFolder,
            plan: RepairPlan, result_digest: str) -> RepairDelivery:
    """Publish the plan's records to the repair topics (or, with `repair.to: topic`, back
    onto the flow's own topics), each at most once ever: a topic's lost records to its own
    repair topic, a write-side loss's upstream rows (with `repair.write_side: publish`), in
    the topic's format, to the repair topic of the topic that lacks them. What a target
    already holds for the flow (a delivery of this plan or of an earlier one, a delivery that
    crashed after some of its transactions committed) is not sent again.
    Refused when the run folder no longer matches the plan, and before anything is published
    when the principal lacks an ACL a delivery needs."""
    from kafka_recon.cluster.preflight import check_repair
    from kafka_recon.sources.kafka_client import endpoint
    from kafka_recon.sources.topic import TopicDenied, check_topic, ensure_topic

    verify(spark, folder, plan, result_digest)
    key = f"{iso_z(window.start)}/{iso_z(window.end)}"  # the window, as headers name it
    txids = f"kafka-recon-repair-{flow.name}-{plan.digest[:16]}"
    tiers = {hop.hop: _target(flow, hop) for hop in plan.hops}
    # every repair topic there and writable before the first record goes out
    partitions: dict[str, int] = {}  # by repair topic
    # the schema a write-side hop's values are written with, by tier: checked first too
    schemas = {tier.name: _write_schema(flow, tier) for hop in plan.hops
               if (tier := tiers[hop.hop]) is not None and hop.source == "upstream"}
    for tier in tiers.values():
        if tier is not None and repair_topic(flow, tier) not in partitions:
            ep, target = endpoint(tier), repair_topic(flow, tier)
            try:
                parts = ensure_topic(ep, target, len(check_topic(ep, tier.topic)))
            except TopicDenied:  # named with the rest of what is missing
                parts = 0
            check_repair(ep, target, f"{txids}-preflight", described=parts > 0)
            partitions[target] = parts
    out: list[DeliveredHop] = []
    for hop in plan.hops:
        tier = tiers[hop.hop]
        if tier is None or not hop.records_dir:
            out.append(DeliveredHop(hop=hop.hop, note=_not_published(hop)))
            continue
        ep, target = endpoint(tier), repair_topic(flow, tier)
        planned = spark.read.parquet(str(folder.inside(hop.records_dir)))
        held = read_repair_topic(spark, ep.spark_options(), target,
                                 copies_since(flow, window))
        if hop.source == "topic":
            done = already_delivered(held, flow.name)
            todo = topic_copies(planned.join(done, ["partition", "offset"], "left_anti"),
                                partitions[target])
        else:
            record = flow.record_of(tier)
            rows = json_records(planned, record, flow.repair.fields)
            text, sid = schemas[tier.name]
            time_path = record.event_time if record.event_time.startswith("$.") else None
            todo = upstream_copies(encoded(rows.join(already_delivered_ids(held, flow.name),
                                                     "id", "left_anti"),
                                           record.format, text, sid, time_path), record)
        # what is left to send, computed once: its ids file, its count and what is published
        # are the same records (the ledger read again after publishing would hold them)
        todo = todo.repartition(PUBLISH_TASKS).cache()
        try:
            sent = todo.count()
            ids_file = f"{_hop_dir(hop.hop)}/delivered.csv"
            write_id_files(spark, [IdFile(folder.inside(ids_file), ("id",),
                                          id_rows(todo.select("id").distinct(), ["id"], "id"))],
                           folder.inside(f"{_hop_dir(hop.hop)}/.parts"))
            fixed = [(H_FLOW, flow.name.encode()), (H_WINDOW, key.encode()),
                     (H_PLAN, plan.digest.encode())]
            # always the same tasks, so a resumed delivery's tasks take the transactional ids
            # of the delivery it resumes (whatever it found left to send) and fence every one
            txid = f"{txids}-{hop.hop.replace('->', '__')}"
            todo.foreachPartition(_publisher(ep.librdkafka(), target, txid, fixed))
        finally:
            release([todo])
        out.append(DeliveredHop(hop=hop.hop, target=target, sent=sent,
                                already=hop.records - sent, ids_file=ids_file))
    delivery = RepairDelivery(plan_digest=plan.digest, delivered_at=iso_z(datetime.now(UTC)),
                              hops=out)
    folder.write(delivery)
    return delivery
