"""Step 2, replay: read the topic's window N times, each with a fresh consumer group.

The `spark-submit` entry point is `kafka_recon/jobs/replay.py`; this module is the step itself.

Each replay reads the offsets found by timestamp (window start .. window end + grace) with
kafka-recon's window reader (`READER`, jvm/src) under a fresh group id of its own; it assigns
partitions and never commits, so production consumer groups are never touched. The first
replay's records (id, event time, partition, offset, Kafka timestamp) are cached for the
reconcile step, which runs in the same Spark application (and written to `replays/r1/`,
Parquet, when the steps run as two); only one summary row per replay reaches the driver.

Later replays read the same offsets and only sum each record's digest (a hash of its partition,
offset, timestamp, key and value): equal to the first's, they read the very same records, so
every figure of their summary is the first's; different, the replay reads once more and
summarises its own ids (`run`).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from kafka_recon.runfiles.replays import FirstRead, OffsetRange, ReplayRun, Replays, TopicReplays
from kafka_recon.spark.read import made_in
from kafka_recon.spark.session import apply_defaults, cache_records, release

if TYPE_CHECKING:
    from kafka_recon.config import Drops, Flow, KafkaTier, RecordSpec
    from kafka_recon.runfolder import RunFolder
    from kafka_recon.sources.kafka_client import KafkaEndpoint
    from kafka_recon.sources.registry import RegistrySchema
    from kafka_recon.sources.topic import PartitionRange
    from kafka_recon.window import Window


TOP_LEVEL = re.compile(r"^\$\.[A-Za-z_][A-Za-z0-9_]*$")

# A replay reads a whole window, start to end: the consumer's defaults (1 MiB per partition per
# fetch, 50 MiB per fetch) are sized for following a live topic; 8 MiB made the median bench run
# 4% faster (bench.tune, docs/performance-history.md). Applied before the flow's own settings,
# which win.
BULK_READ: dict[str, str] = {"kafka.max.partition.fetch.bytes": str(8 * 1024 * 1024),
                             "kafka.fetch.max.bytes": str(64 * 1024 * 1024),
                             "kafka.fetch.max.wait.ms": "10"}


# ------------------------------------------------------------------ pure transforms
def extract_records(raw: DataFrame, record: RecordSpec,
                    schemas: dict[int, RegistrySchema] | None = None,
                    drops: Drops | None = None) -> DataFrame:
    """Kafka rows to (id, event_time, partition, offset, kafka_ts, reason), with built-in
    functions only.

    Ids and event times are read as `kafka_recon.spark.records` says, from the value in the
    record's format (`kafka_recon.spark.formats` for registry-framed and Avro values; `schemas`
    holds the window's schemas by id). A value that is not valid UTF-8 or not JSON, that is
    misframed or does not decode, or lacks a field, or holds a time that is not one, gives a
    null id or event time and a `reason`: the record is counted as unidentifiable with its
    partition and offset, never dropped, and the run goes on.

    With `drops` (what the processor reading this topic filters out on purpose), each record
    also says whether it is one (`dropped`, `with_dropped`).
    """
    from kafka_recon.spark.formats import avro_columns, json_schema_value
    from kafka_recon.spark.records import event_time, utf8_text

    if record.envelope == "debezium":
        return extract_changes(raw, record)
    time_path = None if record.event_time == "kafka_timestamp" else record.event_time
    wanted = tuple(p for p in (drops.fields.values() if drops else ()) if p != "key")
    if record.format == "avro":
        rec_id, when, undecoded, texts = avro_columns(
            F.col("value"), record.schema_file is None, schemas or {}, record.id, time_path,
            record.event_time_format, wanted)
        if drops is not None:
            raw = with_dropped(raw, drops, dict(zip(wanted, texts, strict=True)))
        return _as_records(raw, rec_id, F.col("timestamp") if when is None else when,
                           record, undecoded)
    why: Column | None = None
    if record.format == "json_schema":
        text, unframed = json_schema_value(F.col("value"), schemas or {})
        # the reason reads the framed value: kept before the value becomes its JSON text
        raw = raw.withColumn("_why", unframed).withColumn("value", text)
        why = F.col("_why")
    value = utf8_text(F.col("value"))
    if drops is not None:
        raw = with_dropped(raw, drops, {p: F.get_json_object(value, p) for p in wanted})
    fields = [record.id, record.event_time]
    top = [p[2:] for p in fields if TOP_LEVEL.match(p)]
    if len(top) == 2:
        # both are top-level fields: parse each value once, not once per field
        raw = raw.select(F.json_tuple(value, *top).alias("_id", "_ts"), "key", "value",
                         "partition", "offset", "timestamp",
                         *(["_why"] if why is not None else []), *_carried(raw))
        rec_id = F.col("_id")
        ts_text: Column | None = F.col("_ts")
    else:
        rec_id = (utf8_text(F.col("key")) if record.id == "key" else value
                  if record.id == "value" else F.get_json_object(value, record.id))
        ts_text = F.get_json_object(value, record.event_time) \
            if record.event_time != "kafka_timestamp" else None
    when = F.col("timestamp") if ts_text is None \
        else event_time(ts_text, record.event_time_format)
    return _as_records(raw, rec_id, when, record, why)


def with_dropped(raw: DataFrame, drops: Drops, texts: dict[str, Column]) -> DataFrame:
    """The Kafka rows with `dropped`: whether the processor after this topic filters the
    record out on purpose. `texts` holds each field's text by its path ("key" is the key's);
    a null answer (a field absent, a number that is not one) means kept, so a record the
    filter cannot judge is expected downstream, never excused."""
    from kafka_recon.errors import ConfigError
    from kafka_recon.spark.records import utf8_text

    names = list(drops.fields)
    cols = {n: utf8_text(F.col("key")) if p == "key" else texts[p]
            for n, p in drops.fields.items()}
    try:
        judged = F.coalesce(F.expr(drops.where).cast("boolean"), F.lit(False))
        return (raw.withColumns(cols)
                .withColumn("dropped", judged).drop(*names))
    except (ParseException, AnalysisException) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"drops.where {drops.where!r} over fields {', '.join(names)}: "
                          f"{first}") from None


def record_digest() -> Column:
    """One record read, as a 64-bit hash of where it sits and what it holds."""
    return F.xxhash64("partition", "offset", "timestamp", "key", "value")


def present(record: RecordSpec) -> Column:
    """The Kafka rows that are records: all but a change stream's tombstones."""
    return F.col("value").isNotNull() if record.envelope == "debezium" else F.lit(True)


def _carried(raw: DataFrame) -> list[str]:
    # the digest, when the replay asked for it, whether the next processor drops the record,
    # and a dead-letter queue's context headers go along with each record
    return [c for c in ("digest", "dropped", "op", "dlq_error", "dlq_message", "dlq_stage",
                        "dlq_topic", "dlq_partition", "dlq_offset") if c in raw.columns]


def _as_records(raw: DataFrame, rec_id: Column, when: Column, record: RecordSpec,
                why: Column | None = None) -> DataFrame:
    """The replay's record shape: (id, event_time, partition, offset, kafka_ts, reason), and
    `digest` when the Kafka rows have it; `reason` says why a record is unidentifiable (null
    when it is not)."""
    from kafka_recon.spark.records import normalise_id

    rid = normalise_id(rec_id)
    reasons = [F.when(rid.isNull(), F.lit(f"no readable id at {record.id}")),
               F.when(when.isNull(), F.lit(f"no readable event time at {record.event_time}"))]
    reason = F.coalesce(*([why] if why is not None else []), *reasons)
    return raw.select(rid.alias("id"), when.alias("event_time"), F.col("partition"),
                      F.col("offset"), F.col("timestamp").alias("kafka_ts"),
                      F.when(rid.isNull() | when.isNull(), reason).alias("reason"),
                      *_carried(raw))


def extract_changes(raw: DataFrame, record: RecordSpec) -> DataFrame:
    """Debezium change events (JsonConverter, with or without the `schema` part) to records.

    A tombstone (null value, after a delete) is no record. The id and a JSONPath event time are
    read in the row image: `after` for creates, updates and snapshot reads, `before` for
    deletes; a delete whose `before` lacks the id takes it from the key. `source_ts` is the
    change's commit time in the source database (`source.ts_ms`, epoch ms); a delete whose
    `before` lacks the event time takes that too. Several changes of one id stay several
    records here, each with its `op` (c, r, u, d): the reconcile step counts an id once
    however many updates and deletes carry it, and once per create or snapshot read (a row
    captured twice, as a snapshot read again captures it, has a copy).
    """
    from kafka_recon.spark.records import event_time, utf8_text

    value, key = utf8_text(F.col("value")), utf8_text(F.col("key"))
    env = F.coalesce(F.get_json_object(value, "$.payload"), value)
    key_env = F.coalesce(F.get_json_object(key, "$.payload"), key)
    deleted = F.get_json_object(env, "$.op") == "d"
    row = F.when(deleted, F.get_json_object(env, "$.before")) \
        .otherwise(F.get_json_object(env, "$.after"))
    rec_id = F.get_json_object(row, record.id)
    rec_id = F.when(deleted, F.coalesce(rec_id, F.get_json_object(key_env, record.id))) \
        .otherwise(rec_id)
    changed = event_time(F.get_json_object(env, "$.source.ts_ms"), "epoch_ms")
    if record.event_time == "kafka_timestamp":
        when = F.col("timestamp")
    elif record.event_time == "source_ts":
        when = changed
    else:
        when = event_time(F.get_json_object(row, record.event_time), record.event_time_format)
        when = F.when(deleted, F.coalesce(when, changed)).otherwise(when)
    rows = raw.where(present(record)).withColumn("op", F.get_json_object(env, "$.op"))
    return _as_records(rows, rec_id, when, record)


def counted(start: datetime, end: datetime, closes_at: datetime) -> Column:
    """A topic record of the window: identifiable, its event time in [start, end), and in the
    topic before the window plus grace closed (one that came later is lost, not late)."""
    return made_in(start, end) & (F.col("kafka_ts") < F.lit(closes_at))


def past_grace(start: datetime, end: datetime, closes_at: datetime) -> Column:
    """A record `counted` would take but for its arrival: at or after the close. It counts as
    lost; among the records lost into the topic, it was sent late."""
    return made_in(start, end) & (F.col("kafka_ts") >= F.lit(closes_at))


def arrived(start: datetime, closes_at: datetime) -> Column:
    """In the topic while the window and its grace ran: where an unidentifiable record, whose
    event time is unknown, is counted."""
    return (F.col("kafka_ts") >= F.lit(start)) & (F.col("kafka_ts") < F.lit(closes_at))


def summarize(records: DataFrame, start: datetime, end: datetime,
              closes_at: datetime | None = None, margin: timedelta = timedelta(0),
              distinct: bool = True, to_log_end: Sequence[int] = ()) -> DataFrame:
    """One row: records read, records of the window, distinct ids, unidentifiable, fingerprint,
    `out_of_order`, and, when the records carry it, the sum of their `digest`s.

    Without `distinct` the row has no distinct ids: counting them groups every record by id,
    a shuffle of the whole window, and the reconcile of the same application groups the
    topic's ids anyway (`replay_and_reconcile` fills them in from its tally).

    The fingerprint is the sum of 64-bit hashes of the window's ids (an exact decimal): it does
    not depend on the order records were read in, and replays that read different id multisets
    disagree on it.

    The offsets read are found by Kafka timestamp: from the first record at or after the window
    start less `margin` to the first at or after its close plus `margin`. Out-of-order
    timestamps within the margin hide nothing: every record of the window lies inside what was
    read. A record read that is stamped further out proves disorder wider than the margin, so
    records of the window may lie beyond what was read: `out_of_order` counts them.
    """
    closes_at = closes_at or end
    identifiable = F.col("id").isNotNull() & F.col("event_time").isNotNull()
    in_window = counted(start, end, closes_at)
    return records.agg(
        F.count(F.lit(1)).alias("read"),
        F.count(F.when(in_window, 1)).alias("count"),
        *([F.count_distinct(F.when(in_window, F.col("id"))).alias("distinct")]
          if distinct else []),
        F.count(F.when(~identifiable & arrived(start, closes_at), 1)).alias("unidentifiable"),
        hash_sum(F.when(in_window, F.xxhash64("id"))).alias("fingerprint"),
        F.count(F.when((F.col("kafka_ts") < F.lit(start - margin))
                       | ((F.col("kafka_ts") >= F.lit(closes_at + margin))
                          & ~F.col("partition").isin(list(to_log_end))), 1)
                ).alias("out_of_order"),
        *([hash_sum(F.col("digest")).alias("digest")] if "digest" in records.columns else []),
    )


def digests(raw: DataFrame, record: RecordSpec) -> DataFrame:
    """One row: the records read and the sum of their digests, without reading a value's
    fields: all a later replay computes to prove it read what the first read."""
    return (raw.where(present(record)).select(record_digest().alias("digest"))
            .agg(F.count(F.lit(1)).alias("read"), hash_sum(F.col("digest")).alias("digest")))


# a 64-bit hash as four 16-bit pieces: the top one signed (an arithmetic shift), the others not
HASH_PIECES = (48, 32, 16, 0)


def hash_sum(hashes: Column) -> Column:
    """The sum of 64-bit hashes as exact decimal text ("0" for none): a long would overflow,
    and a sum does not depend on the order rows were read in.

    Summed as four long sums of 16-bit pieces, joined as one decimal at the end: each piece's
    sum stays below 2^63 for up to 2^47 rows, and a long sum adds in place where a sum of
    decimal(38,0) made a BigInteger per row (7% of a run's task samples at 5M)."""
    from decimal import Decimal


    exact = "decimal(38,0)"
    total = F.lit(0).cast(exact)
    for shift in HASH_PIECES:
        piece = F.shiftright(hashes, shift)
        piece = piece if shift == HASH_PIECES[0] else piece.bitwiseAND(0xFFFF)
        # (the total stays below 2^111: well inside 38 digits)
        total = total + F.coalesce(F.sum(piece), F.lit(0)).cast(exact) \
            * F.lit(Decimal(2 ** shift)).cast(exact)
    return total.cast("string")


# ------------------------------------------------------------------ I/O
# kafka-recon's own Spark source for a window's fixed offsets (jvm/src, built by `make reader`
# into the Spark jars). Spark's Kafka source gives each task one consumer for one partition
# and asks the broker for the partition's offset range after every poll: a bare read of a
# million records took 3.0-3.7 s here where this reader, one consumer for several partitions
# per task, takes 1.0-1.1 s (docs/performance-history.md, "The window reader").
READER = "kafkarecon.spark.KafkaWindowSource"


def read_window(spark: SparkSession, ep: KafkaEndpoint, topic: str, ranges: list[PartitionRange],
                group: str, isolation_level: str) -> DataFrame:
    """(key, value, partition, offset, timestamp) of every record of the offset ranges, each
    partition's [start, end): exactly those the broker holds and the isolation level shows.
    A range whose records the log no longer holds fails the read (never a part of it)."""
    # the endpoint's settings in the Java client's names: the same cluster, principal and TLS
    # as staging. Kafka's clients log them with passwords, keys and the JAAS string hidden.
    return (
        spark.read.format(READER)
        .options(**BULK_READ)
        .options(**ep.spark_options())  # the flow's own settings win
        .option("topic", topic)
        .option("ranges", ",".join(f"{r.partition}:{r.start}:{r.end}" for r in ranges))
        .option("groupId", group)
        .option("kafka.isolation.level", isolation_level)
        .load()
    )


def window_schemas(spark: SparkSession, ep: KafkaEndpoint, tier: KafkaTier, record: RecordSpec,
                   ranges: list[PartitionRange], also: DataFrame | None = None
                   ) -> dict[int, RegistrySchema] | None:
    """The schemas the window's values need, by schema id: none for JSON; the flow's schema
    file (under id 0) for Avro written without a registry; else each distinct schema id of
    the window's framed values and of `also`'s (the rows a repair published for it), asked
    of the registry once (a few ids reach the driver)."""
    from pathlib import Path

    from kafka_recon.errors import ConfigError
    from kafka_recon.sources import registry
    from kafka_recon.sources.topic import GROUP_PREFIX
    from kafka_recon.spark.formats import framing

    if record.format == "json":
        return None
    if record.schema_file:
        try:
            return {0: registry.RegistrySchema(text=Path(record.schema_file).read_text())}
        except OSError as exc:
            raise ConfigError(f"schema_file {record.schema_file}: cannot read it: "
                              f"{exc.strerror}") from None
    conf = ep.registry_conf(tier.schema_registry)
    framed, sid, _ = framing(F.col("value"))
    raw = read_window(spark, ep, tier.topic, ranges,
                      f"{GROUP_PREFIX}schemas-{uuid.uuid4().hex[:12]}", tier.isolation_level)
    if also is not None:
        raw = raw.select("value").unionByName(also.select("value"))
    ids = [int(r["sid"]) for r in raw.where(framed).select(sid.alias("sid")).distinct()
           .collect()]
    return registry.schemas(conf, ids, record.format)


def run(spark: SparkSession, flow: Flow, window: Window, folder: RunFolder,
        replays_wanted: int | None = None, keep_records: bool = True, distinct: bool = True
        ) -> tuple[Replays, dict[str, DataFrame]]:
    """Replay each of the flow's topics: what replays.json holds (one entry per topic, in flow
    order) and each topic's first-replay records, cached, by tier name (`replay_topic`).
    Without `distinct`, each first replay's distinct ids are left for the reconcile of the
    same application to count (`summarize`)."""
    topics: list[TopicReplays] = []
    records: dict[str, DataFrame] = {}
    try:
        for tier in flow.kafka_tiers:
            doc, first = replay_topic(spark, flow, tier, window, folder, replays_wanted,
                                      keep_records, distinct)
            topics.append(doc)
            records[tier.name] = first
    except BaseException:
        release(records.values())
        raise
    return Replays(topics=topics), records


@dataclass(frozen=True)
class _Reads:
    """How one topic's window is read, replay after replay."""

    spark: SparkSession
    flow: Flow
    tier: KafkaTier
    window: Window                 # with the topic's own grace
    ep: KafkaEndpoint
    ranges: list[PartitionRange]   # the offsets read: the window widened by the disorder margin
    schemas: dict[int, RegistrySchema] | None   # none: JSON values
    wanted: int
    repaired: DataFrame | None = None  # the repair topic's write-side records of the window
    distinct: bool = True  # the first replay counts its distinct ids (else the reconcile does)

    def fresh(self, i: int, retry: str = "") -> tuple[str, DataFrame]:
        """The window read under a fresh consumer group of its own, with the records a
        write-side repair published for it, when they count."""
        from kafka_recon.sources.topic import GROUP_PREFIX

        group = f"{GROUP_PREFIX}{self.flow.name}-{uuid.uuid4().hex[:12]}-r{i}{retry}"
        raw = read_window(self.spark, self.ep, self.tier.topic, self.ranges, group,
                          self.tier.isolation_level)
        return group, raw if self.repaired is None else raw.unionByName(self.repaired)

    def records(self, raw: DataFrame) -> DataFrame:
        # a digest per record only when a later replay will compare with it
        return extract_records(raw.withColumn("digest", record_digest())
                               if self.wanted > 1 else raw, self.flow.record_of(self.tier),
                               self.schemas, self.flow.drops_after(self.tier))

    def summarised(self, records: DataFrame, distinct: bool = True) -> dict[str, Any]:
        # an aggregate always yields exactly one row; the exact decimal sums as text
        w = self.window
        row = summarize(records, w.start, w.end, w.closes_at, self.flow.disorder, distinct,
                        [r.partition for r in self.ranges if r.why]).collect()[0].asDict()
        return {k: _text(v) if k in ("fingerprint", "digest") else v for k, v in row.items()}


# how far before the replay's offsets the loss search looks for lost ids: a clock behind by
# more than this is not skew but a wrong clock, and a window's worth before its start is as
# far as a record of it can sensibly be stamped
SEARCH_BACK = timedelta(hours=1)


def outside_the_read(spark: SparkSession, flow: Flow, tier: KafkaTier, window: Window,
                     topic: TopicReplays) -> tuple[DataFrame | None, DataFrame | None]:
    """The loss search: the topic's records of the window just before the offsets replayed
    and past them, where ids lost into the topic are looked for (each None when there is
    nothing there to read). Lazy but for the offsets and the schemas a registry's values need.

    The replay's offsets are found by Kafka timestamp, from each partition's first record
    stamped at or after the window's start less the disorder margin to its first at or after
    the close plus it. Before: from the first stamped at or after `SEARCH_BACK` (at most the
    window's length) earlier still; a lost id there is in the topic, stamped earlier than the
    margin allows (a producer's clock behind, a backfill): not lost. Past: to the partition's
    last stable offset when the window was replayed; a record there was written after one
    stamped past the close, whatever its own timestamp says (a transaction committed late, a
    backfill, a clock ahead): lost by the window's rule, sent late."""
    from kafka_recon.sources.kafka_client import endpoint
    from kafka_recon.sources.topic import GROUP_PREFIX, PartitionRange, window_offsets
    from kafka_recon.window import Window

    ep = endpoint(tier)
    record = flow.record_of(tier)
    read_from = window.start - flow.disorder
    back = window_offsets(ep, tier.topic, Window.millis(read_from - min(
        SEARCH_BACK, window.end - window.start)), Window.millis(read_from))
    start_of = {r.partition: r.start for r in back}
    before = [PartitionRange(r.partition, first, r.start, r.log_start, r.high_watermark)
              for r in topic.read_offsets
              if (first := max(start_of.get(r.partition, r.start), r.log_start)) < r.start]
    past = [PartitionRange(r.partition, r.end, r.high_watermark, r.log_start, r.high_watermark)
            for r in topic.read_offsets if r.end < r.high_watermark]

    def read(ranges: list[PartitionRange], what: str) -> DataFrame | None:
        if not ranges:
            return None
        raw = read_window(spark, ep, tier.topic, ranges,
                          f"{GROUP_PREFIX}{flow.name}-{uuid.uuid4().hex[:12]}-{what}",
                          tier.isolation_level)
        return extract_records(raw, record, window_schemas(spark, ep, tier, record, ranges),
                               flow.drops_after(tier)).where(made_in(window.start, window.end))

    return read(before, "before"), read(past, "past")


def replay_topic(spark: SparkSession, flow: Flow, tier: KafkaTier, window: Window,
                 folder: RunFolder, replays_wanted: int | None = None, keep_records: bool = True,
                 distinct: bool = True) -> tuple[TopicReplays, DataFrame]:
    """Replay one topic's window `replays_wanted` times (default: the flow's count).

    Returns its entry of replays.json and its first replay's records, cached: the reconcile
    step of the same application reads them from memory (`replays`). `keep_records` also
    writes the first replay's records to `replays/<tier>/r1/` (Parquet), for a reconcile step
    run as another application, or to look at. The topic's own grace (a mirror lags) sets
    when its window closes.
    """
    from dataclasses import replace

    from kafka_recon.cluster.mirror import mirror_commits
    from kafka_recon.cluster.transactions import TransactionOpen, blocked_partitions, named
    from kafka_recon.sources.kafka_client import endpoint
    from kafka_recon.sources.topic import as_json, committed_offsets, read_ranges, window_offsets
    from kafka_recon.spark.repair_topic import repaired_of
    from kafka_recon.window import Window

    window = replace(window, grace=flow.grace_of(tier))
    ep = endpoint(tier)
    # the window's offsets (the estimate, retention) and the wider ones read (the disorder
    # margin on both sides)
    ranges = window_offsets(ep, tier.topic, Window.millis(window.start),
                            Window.millis(window.closes_at))
    read = read_ranges(ep, flow, tier, window)
    # staging waited for the transactions open on the window's partitions; one open now holds
    # back records of the window (a read_committed read stops at it): not judged, named
    if blocked := blocked_partitions(ep, tier.topic, read):
        raise TransactionOpen(tier.topic, named(ep, tier.topic, blocked))
    # the shuffles sized for the largest thing counted: this topic's records, if more
    apply_defaults(spark, sum(r.end - r.start for r in read), grow_only=True)
    committed = committed_offsets(ep, tier.topic, tier.consumer_groups,
                                  [r.partition for r in ranges])
    committed.update(mirror_commits(flow, tier))  # the mirror copying it on, if any
    # what a write-side repair published for the window counts as the topic's own
    repair = (None if tier is not flow.topic_tier
              else repaired_of(spark, flow, tier, window, folder))
    reads = _Reads(spark, flow, tier, window, ep, read,
                   window_schemas(spark, ep, tier, flow.record_of(tier), read,
                                  repair[1] if repair else None),
                   replays_wanted or flow.replays, repair[1] if repair else None, distinct)
    try:
        runs, first = replays(reads, folder, keep_records)
        repaired = repair[1].count() if repair else 0
    finally:
        if repair:
            release([repair[1]])
    out = TopicReplays(
        tier=tier.name,
        offsets=[OffsetRange.model_validate(r) for r in as_json(ranges)],
        read_offsets=[OffsetRange.model_validate(r) for r in as_json(read)],
        disorder_seconds=int(flow.disorder.total_seconds()),
        estimate=sum(r.end - r.start for r in ranges),
        committed={g: {str(p): o for p, o in offs.items()} for g, offs in committed.items()},
        grace_seconds=int(window.grace.total_seconds()),
        replays=runs,
        repair_topic=repair[0] if repair and repaired else None,
        repaired=repaired,
    )
    return out, first


def replays(reads: _Reads, folder: RunFolder, keep_records: bool
            ) -> tuple[list[ReplayRun], DataFrame]:
    """Each replay of the window, and the first one's records, cached. Each replay is one pass
    over Kafka: the first caches its records as it summarises them; a later one only sums its
    records' digests, and is summarised as the first when they match (`same_records`), else
    from one more read of its own (a record changed or vanished between the reads)."""
    runs: list[ReplayRun] = []
    first: DataFrame | None = None
    for i in range(1, reads.wanted + 1):
        group, raw = reads.fresh(i)
        if first is None:
            # one pass: the summary fills the cache the reconcile step reads
            first = cache_records(reads.records(raw))
            entry = ReplayRun(group=group, **reads.summarised(first, reads.distinct))
            if keep_records:
                target = folder.replay_dir(i, reads.tier.name)
                # overwrite: re-running the window replaces this replay
                first.write.mode("overwrite").parquet(str(target))
                entry.path = str(target)
        else:
            got = digests(raw, reads.flow.record_of(reads.tier)).collect()[0]
            if (got["read"], _text(got["digest"])) == (runs[0].read, runs[0].digest):
                # the very same records: every figure of the summary is the first's
                entry = runs[0].model_copy(update={"path": None, "group": group,
                                                   "same_records": True})
            else:
                # other records: this replay's own ids, from one more read (a fresh group)
                group, raw = reads.fresh(i, "b")
                entry = ReplayRun(group=group, **reads.summarised(reads.records(raw)),
                                  same_records=False,
                                  first_read=FirstRead(read=got["read"],
                                                       digest=_text(got["digest"])))
        runs.append(entry)
    assert first is not None  # a flow replays at least once (config)
    return runs, first


def _text(value: Any) -> str | None:
    """An exact decimal sum as JSON keeps it: text, every digit."""
    return None if value is None else str(value)
