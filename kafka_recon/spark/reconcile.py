"""Step 3, reconcile: ids per tier and bucket to per-hop missing, unexpected and duplicate records.

The `spark-submit` entry point is `kafka_recon/jobs/reconcile.py`; this module is the step
itself, put together from its phases, each a module of pure transforms:

    read      each id tier's records in the window (a topic's from the replay, a SQL tier's
              over JDBC), with their bucket
    tally     every id tier's records per bucket, unidentifiable, late, a topic's span per
              partition: one job, a few rows to the driver
    compare   every id tier's ids grouped by id once; each hop's missing, unexpected and
              duplicate ids read off that one row per id (`marks`), exactly
    evidence  where the records of a finding sit (runs of offsets, the upstream's order, the
              copies' timestamps), every hop's summarised in one job
    idfiles   every id of every finding written in full by the executors, all in one job

Only per-bucket counts and the largest runs reach the driver; the step returns them as
`Aggregates` (reconcile.json) and `kafka_recon.result.build` turns them into the result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from kafka_recon.config import Flow, KafkaTier, Point, SqlTier, TableTier
from kafka_recon.runfiles.aggregates import (
    Aggregates,
    CounterGap,
    DeadLetterError,
    DeadLetters,
    HopBuckets,
    HopTally,
    PartitionSpan,
    RetentionSplit,
    Shape,
    TierTally,
)
from kafka_recon.runfiles.connectors import Connectors
from kafka_recon.runfiles.replays import Replays, TopicReplays
from kafka_recon.runfiles.stage import Stage
from kafka_recon.runfolder import RunFolder
from kafka_recon.sources.table import TableRead
from kafka_recon.sources.topic import PartitionRange, retention_cut
from kafka_recon.spark.compare import compare, ids_of, late, marks, missing
from kafka_recon.spark.evidence import (
    Table,
    after_grace,
    evidence_asks,
    inside_upstream,
    late_arrivals,
    needs_sort,
    outside_read,
    rank_topic,
    read_off_topic,
    summaries,
    upstream_runs,
    upstream_slice,
)
from kafka_recon.spark.idfiles import IdFile, id_rows, write_id_files, write_ids
from kafka_recon.spark.read import (
    identifiable,
    read_sql_tier,
    read_table_tier,
    window_records,
)
from kafka_recon.spark.replay import arrived, counted, outside_the_read, past_grace
from kafka_recon.spark.session import cache_records, names, release
from kafka_recon.spark.tally import (
    bucket_counts,
    record_marks,
    reduce_union,
    tallied,
    tally_keeping_findings,
    to_read,
)
from kafka_recon.window import Window, from_micros, iso_z

Tallies = dict[tuple[str, int], dict[str, Any]]
FINDING_KINDS = ("missing", "unexpected", "duplicate")


@dataclass
class DeadQueue:
    """A sink connector's dead-letter queue, read for the window: its records are compared
    with the ids missing on the hop into the sink (`slot`: its place after the id tiers in the
    one comparison)."""

    topic: str
    connector: str
    context_headers: bool
    records: DataFrame        # identifiable, of the window, with their bucket and dlq_*
    unreadable: DataFrame     # without a readable id or event time
    slot: int = -1


@dataclass(frozen=True)
class Beyond:
    """Where a topic holds records lost into it: its identifiable records of the window stamped
    after the close, inside the margin the replay read (`inside`: sent late), and the loss
    search (`outside`: its records before and past the offsets replayed, read only when
    something was lost into the topic, `outside_the_read`)."""

    inside: DataFrame
    closes_at: datetime
    read_from: datetime   # the window's start less the disorder margin: where the read begins
    read_to: datetime     # the close plus the disorder margin: where it ends
    outside: Callable[[], tuple[DataFrame | None, DataFrame | None]]


@dataclass
class IdTiers:
    """The flow's id tiers as this run read them. A tier's place among the id tiers (`k`) is
    its slot; `slot` maps a point's index to it."""

    slot: dict[int, int]
    raws: list[DataFrame]              # every record read, by slot
    records: list[DataFrame]           # the identifiable window records, with their bucket
    topics: dict[int, KafkaTier]       # the slots that are topics
    cached: list[DataFrame] = field(default_factory=list)  # unpersisted when the step ends
    tables: dict[int, TableRead] = field(default_factory=dict)  # a table slot: as read
    dead: dict[int, DeadQueue] = field(default_factory=dict)  # a point: its sink's queue
    # a topic slot: where records lost into it may be, sent late (`Beyond`)
    beyond: dict[int, Beyond] = field(default_factory=dict)

    def keep(self, df: DataFrame) -> DataFrame:
        self.cached.append(df.cache())
        return df

    def keep_records(self, df: DataFrame) -> DataFrame:
        """A tier's records, cached as `cache_records` does."""
        self.cached.append(cache_records(df))
        return df


@dataclass
class Counts:
    """What the tallies and the one comparison found, by slot and hop."""

    per_record: Tallies                # (kind, slot): record, unidentifiable, late
    spans: dict[int, dict[str, Any]]   # a topic slot: its window per partition
    per_id: Tallies                    # (kind, slot or hop): present, missing, ...
    findings: DataFrame | None         # every mark but `present`, cached
    compared: DataFrame | None
    hop_at: dict[int, int]             # a point's index -> its hop among id-tier hops
    dropping: frozenset[int]           # topic slots whose processor declares its drops


def run(spark: SparkSession, flow: Flow, window: Window, folder: RunFolder, staged: Stage,
        replays: Replays, topic_records: dict[str, DataFrame] | None = None,
        connectors: Connectors | None = None) -> Aggregates:
    """Count every point of the flow and compare each hop. Each topic's first-replay records
    are the replay step's (`topic_records`, by tier name, in memory) or, when the steps ran
    apart, read from their Parquet folders; the staged counts are the count-only points'.

    The plan: each id tier is read once and cached; one job tallies their records; one
    grouping by id (`compare`) answers every hop, and one job tallies it (and fills the
    findings' cache); one job summarises the evidence of causes of every hop with findings,
    after a small job per evidence table that broadcasts its ids; one job writes every id file.
    """
    ids = read_id_tiers(spark, flow, window, replays, topic_records,
                        {p.name: p.count for p in staged.points})
    try:
        read_dead_letters(spark, flow, window, ids, connectors)
        counts = count(flow, window, ids)
        files: list[IdFile] = []
        tiers = [tier_tally(flow, window, folder, staged, ids, counts, i, files)
                 for i in range(len(flow.points))]
        hops = hop_tallies(flow, window, folder, ids, counts, tiers, files)
        write_id_files(spark, files, folder.path / ".ids.parts")
        by_name = {p.name: ids_of(counts.compared, ids.slot[i])
                   if counts.compared is not None and i in ids.slot else None
                   for i, p in enumerate(flow.points)}
        name_ids_across_counts(flow.points, by_name, hops, folder)
        retention = [split for t in flow.kafka_tiers
                     if (split := retention_split(flow, window, replays.of(t.name), by_name,
                                                  folder))]
        return Aggregates(tiers=tiers, hops=hops, retention=retention)
    finally:
        release(ids.cached)


def read_id_tiers(spark: SparkSession, flow: Flow, window: Window, replays: Replays,
                  topic_records: dict[str, DataFrame] | None,
                  staged: dict[str, int] | None = None) -> IdTiers:
    """Each id tier's records, read once: a topic's (the replay read a margin beyond the
    window: what counts, and where an unidentifiable record counts, is decided here as in the
    replay's summary, with the topic's own grace), a SQL tier's over JDBC in its slices (as
    many as what staging counted of it calls for: `staged`, by point name)."""
    bucket_s = int(flow.bucket.total_seconds())
    exact = [i for i, p in enumerate(flow.points) if p.exact]
    ids = IdTiers(slot={i: k for k, i in enumerate(exact)}, raws=[], records=[], topics={})
    try:
        for i in exact:
            tier = flow.points[i].tier
            if isinstance(tier, KafkaTier):
                raw = topic_records[tier.name] if topic_records is not None \
                    else spark.read.parquet(_kept_records(replays.of(tier.name)))
                closes_at = replace(window, grace=flow.grace_of(tier)).closes_at
                ids.beyond[ids.slot[i]] = Beyond(
                    raw.where(past_grace(window.start, window.end, closes_at)), closes_at,
                    window.start - flow.disorder, closes_at + flow.disorder,
                    partial(outside_the_read, spark, flow, tier, window, replays.of(tier.name)))
                raw = raw.where(counted(window.start, window.end, closes_at)
                                | (~identifiable(raw) & arrived(window.start, closes_at)))
                ids.topics[ids.slot[i]] = tier
                # already in memory: a filter over the replay's cache
                ids.raws.append(raw if topic_records is not None else ids.keep_records(raw))
            elif isinstance(tier, TableTier):
                table = read_table_tier(spark, tier, window)
                ids.tables[ids.slot[i]] = table
                ids.raws.append(ids.keep_records(table.records))
            else:
                assert isinstance(tier, SqlTier)  # an id tier is a topic, a table or SQL
                ids.raws.append(ids.keep_records(read_sql_tier(
                    spark, tier, window, (staged or {}).get(flow.points[i].name))))
        ids.records = [window_records(r, window.start, window.end, bucket_s) for r in ids.raws]
    except BaseException:
        release(ids.cached)
        raise
    return ids


def read_dead_letters(spark: SparkSession, flow: Flow, window: Window, ids: IdTiers,
                      connectors: Connectors | None) -> None:
    """Each sink connector's dead-letter queue, when the sink and the topic before it are id
    tiers and the queue is known (the connector's config, else the flow's
    `dead_letter_topic`): its records of the window, cached, into `ids.dead`."""
    from kafka_recon.sources.kafka_client import endpoint
    from kafka_recon.spark.deadletters import of_window, queue_records, read_queue

    bucket_s = int(flow.bucket.total_seconds())
    for i, point in enumerate(flow.points):
        connector = flow.sink_connector(point.name)
        before = flow.points[i - 1].tier if i else None
        if connector is None or i not in ids.slot or i - 1 not in ids.slot \
                or not isinstance(before, KafkaTier):
            continue
        snap = connectors.of(point.name) if connectors else None
        topic = (snap.dead_letter_topic if snap else None) or connector.dead_letter_topic
        if not topic:
            continue
        closes_at = replace(window, grace=flow.grace_of(before)).closes_at
        raw = read_queue(spark, endpoint(before), topic,
                         Window.millis(window.start - flow.disorder))
        if raw is None:
            continue
        records = ids.keep(queue_records(raw, flow.record_of(before), before.topic))
        found, unreadable = of_window(records, window.start, window.end, closes_at, bucket_s)
        ids.dead[i] = DeadQueue(topic, connector.name,
                                snap.context_headers if snap else False, found, unreadable)


def _kept_records(topic: TopicReplays) -> str:
    path = topic.replays[0].path
    if path is None:
        raise FileNotFoundError(f"topic '{topic.tier}': its first replay's records were not "
                                "kept: run replay and reconcile in one application, or keep "
                                "the replays (KAFKA_RECON_KEEP_REPLAYS)")
    return path


def count(flow: Flow, window: Window, ids: IdTiers) -> Counts:
    """One job tallies every id tier's records (per bucket, unidentifiable and late, a topic's
    per partition); one grouping by id answers every hop between two id tiers."""
    bucket_s = int(flow.bucket.total_seconds())
    per_record = tallied(reduce_union([
        record_marks(r, k, window.start, window.end, bucket_s,
                     "kafka_ts" if k in ids.topics else "event_time", k in ids.topics)
        for k, r in enumerate(ids.raws)]), records=True)
    spans = {k: per_record.pop(("span", k), {}) for k in ids.topics}
    hop_at: dict[int, int] = {}
    hop_specs: list[tuple[int, int, list[int]]] = []
    for i in range(len(flow.points) - 1):
        if i in ids.slot and i + 1 in ids.slot:
            hop_at[i] = len(hop_specs)
            hop_specs.append((ids.slot[i], ids.slot[i + 1],
                              [k for j, k in ids.slot.items() if j <= i]))
    # a change stream counts an id once however many changes carry it
    collapse = frozenset(k for k, t in ids.topics.items()
                         if flow.record_of(t).envelope == "debezium")
    # the topics whose next processor declares what it drops on purpose
    dropping = frozenset(k for k, t in ids.topics.items() if flow.drops_after(t) is not None)
    if not ids.records:
        return Counts(per_record, spans, {}, None, None, hop_at, dropping)
    # each sink's dead-letter queue: compared after the id tiers, read by the hop into it
    dead: dict[int, int] = {}
    for j, (i, queue) in enumerate(sorted(ids.dead.items())):
        queue.slot = len(ids.records) + j
        if i - 1 in hop_at:
            dead[hop_at[i - 1]] = queue.slot
    queues = [q.records for _, q in sorted(ids.dead.items())]
    compared = ids.keep(compare(ids.records + queues, collapse, dropping))
    per_id, findings = tally_keeping_findings(
        marks(compared, len(ids.records), hop_specs, dropping, dead))
    ids.cached.append(findings)
    return Counts(per_record, spans, per_id, to_read(findings, per_id), compared, hop_at,
                  dropping)


def tier_tally(flow: Flow, window: Window, folder: RunFolder, staged: Stage, ids: IdTiers,
               counts: Counts, i: int, files: list[IdFile]) -> TierTally:
    """One point's counts: an id tier's from the tallies (its unidentifiable and late records
    added to the id files), a count-only point's as staged."""
    point = flow.points[i]
    if i not in ids.slot:
        st = staged.point(point.name)
        return TierTally(name=point.name, type=point.tier.type, count=st.count,
                         buckets=st.buckets, exact=False, restarts=st.restarts)
    k = ids.slot[i]
    got = counts.per_record.get(("record", k), {})
    bad = counts.per_record.get(("unidentifiable", k), {})
    tally = TierTally(name=point.name, type=point.tier.type, count=sum(got.values()),
                      distinct=sum(counts.per_id.get(("present", k), {}).values()),
                      buckets=got, exact=True, unidentifiable=sum(bad.values()))
    for key in ("newest", "newest_arrival"):  # how fresh the tier is
        latest = counts.per_record.get((key, k), {})
        if latest:
            setattr(tally, key, iso_z(from_micros(max(latest.values()))))
    if k in ids.tables:
        tally.as_of, tally.writers = ids.tables[k].as_of, ids.tables[k].writers
    if tally.unidentifiable:
        target = folder.ids_file("unidentifiable", point.tier.name)
        unreadable = ids.raws[k].where(~identifiable(ids.raws[k]))
        files.append(IdFile(target, ("partition", "offset", "reason"),
                            id_rows(unreadable, ["partition", "offset", "reason"], None,
                                    "partition", "offset"))
                     if k in ids.topics else
                     IdFile(target, ("id", "event_time"),
                            id_rows(unreadable, ["id", "event_time"], "id")))
        tally.unidentifiable_file = str(target)
        tally.unidentifiable_buckets = {b: n for b, n in bad.items() if b}
    if k in ids.topics:
        tally.partitions = {p: PartitionSpan.model_validate(s)
                            for p, s in counts.spans[k].items()}
        lt = counts.per_record.get(("late", k), {})
        tally.late = sum(lt.values())
        if tally.late:
            target = folder.ids_file("late", point.tier.name)
            files.append(IdFile(target, ("id",), id_rows(late(ids.records[k], window.end),
                                                         ["id"], "id")))
            tally.late_file, tally.late_buckets = str(target), lt
    return tally


def hop_tallies(flow: Flow, window: Window, folder: RunFolder, ids: IdTiers, counts: Counts,
                tiers: list[TierTally], files: list[IdFile]) -> list[HopTally]:
    """Every hop's counts (by id between two id tiers, else by count per bucket), with the
    evidence of causes of each hop with findings, summarised in one job."""
    def ranked(k: int) -> DataFrame:
        """A topic's records ranked per partition, once: every hop's asks of it read it in
        one pass (`read_off_topic`)."""
        rank = rank_topic(ids.records[k], counts.spans[k])
        return ids.keep(rank) if needs_sort(counts.spans[k]) else rank  # a sort is kept

    points = flow.points
    hops: list[HopTally] = []
    shapes: dict[tuple[int, str], Table] = {}
    bounds: dict[int, Beyond] = {}  # a hop into a topic: its close and the offsets read
    # by topic slot: what every hop asks of its records, read off them in one pass
    of_topic: dict[int, dict[tuple[int, str], tuple[str, DataFrame]]] = {}
    for i, (a, b) in enumerate(zip(points, points[1:], strict=False)):
        if i not in counts.hop_at:
            hops.append(counted_hop(flow, a, b, tiers[i], tiers[i + 1]))
            continue
        hop, found = exact_hop(flow, folder, ids, counts, i, files)
        if hop.missing and ids.slot[i + 1] in ids.beyond:
            # into a topic: were the lost records sent after its grace? (read in the one
            # evidence job, beside the other tables)
            beyond = ids.beyond[ids.slot[i + 1]]
            bounds[i] = beyond
            shapes[(i, "missing_after_grace")] = after_grace(found["missing"], beyond.inside)
            # the loss search: the ids not there, looked for before and past the offsets
            # replayed (a lost id found before them is not lost, and not looked for after)
            unseen = found["missing"].join(beyond.inside.select("id"), "id", "left_anti")
            before, past = beyond.outside()
            if before is not None:
                shapes[(i, "missing_before_read")] = after_grace(unseen, before)
                unseen = unseen.join(before.select("id"), "id", "left_anti")
            if past is not None:
                shapes[(i, "missing_past_read")] = after_grace(unseen, past)
        if hop.unexpected and isinstance(b.tier, KafkaTier) and not isinstance(a.tier,
                                                                                KafkaTier):
            hop.unexpected_inside = inside_upstream(found["unexpected"],
                                                    ids.records[ids.slot[i]])
        hops.append(hop)
        for key, ask in evidence_asks(hop, a, b, found).items():
            k = ids.slot[i] if ask.end == "a" else ids.slot[i + 1]
            if ask.kind == "upstream":
                shapes[(i, key)] = upstream_runs(
                    ask.marked, ids.records[k], unique=tiers[i].count == tiers[i].distinct,
                    slice_us=upstream_slice(tiers[i].count, window.end - window.start))
            else:
                of_topic.setdefault(k, {})[(i, key)] = (ask.kind, ask.marked)
    for (at, key), summary in summaries(shapes, [read_off_topic(ranked(k), asks)
                                                 for k, asks in of_topic.items()]).items():
        if key == "missing_after_grace":
            assert isinstance(summary, Shape)
            hops[at].missing_after_grace = late_arrivals(summary, bounds[at].closes_at)
        elif key in ("missing_before_read", "missing_past_read"):
            assert isinstance(summary, Shape)
            setattr(hops[at], key, outside_read(summary, bounds[at].read_from
                                                if key == "missing_before_read"
                                                else bounds[at].read_to))
        else:
            setattr(hops[at], key, summary)
    return hops


def exact_hop(flow: Flow, folder: RunFolder, ids: IdTiers, counts: Counts, i: int,
              files: list[IdFile]) -> tuple[HopTally, dict[str, DataFrame]]:
    """A hop between two id tiers, read off the one comparison: its counts per bucket, its id
    files, and its findings' ids (for the evidence)."""
    a, b = flow.points[i], flow.points[i + 1]
    k, stem = counts.hop_at[i], f"{a.name}__{b.name}"
    assert counts.findings is not None
    queue = ids.dead.get(i + 1)
    kinds = [*FINDING_KINDS, *(["filtered"] if ids.slot[i] in counts.dropping else []),
             *(["dead_lettered"] if queue is not None else [])]
    found = {kind: counts.findings.where((F.col("kind") == kind) & (F.col("at") == k))
             for kind in kinds}
    paths = {kind: folder.ids_file(kind, stem) for kind in kinds}
    for kind in kinds:
        if kind == "dead_lettered":
            continue  # with its errors and offsets, below
        rows = found[kind].withColumnRenamed("value", "extra") if kind == "duplicate" \
            else found[kind]
        columns = ["id", "extra"] if kind == "duplicate" else ["id"]
        files.append(IdFile(paths[kind], tuple(columns),
                            id_rows(rows, columns, "id", *columns[1:]), one_task=True,
                            empty=not any(counts.per_id.get((kind, k), {}).values())))
    expected = counts.per_id.get(("present", ids.slot[i]), {})
    on_purpose = counts.per_id.get(("filtered", k), {}) if "filtered" in kinds else None
    if on_purpose is not None:
        # what the processor drops on purpose was never expected after it
        expected = {x: c - on_purpose.get(x, 0) for x, c in expected.items()
                    if c - on_purpose.get(x, 0)}
    routed = counts.per_id.get(("dead_lettered", k), {}) if queue is not None else None
    buckets = HopBuckets(**{kind: counts.per_id.get((kind, k), {}) for kind in FINDING_KINDS},
                         expected=expected, filtered=on_purpose, dead_lettered=routed,
                         observed=counts.per_id.get(("present", ids.slot[i + 1]), {}))
    hop = HopTally.model_validate({
        "from": a.name, "to": b.name, "side": flow.side_of(a.name), "exact": True,
        "expected": sum(expected.values()),
        "observed": sum(counts.per_id.get(("present", ids.slot[i + 1]), {}).values()),
        **{kind: sum(getattr(buckets, kind).values()) for kind in FINDING_KINDS},
        **{f"{kind}_ids": str(paths[kind]) for kind in kinds},
        "buckets": buckets,
        **({"filtered": sum(on_purpose.values())} if on_purpose is not None else {})})
    if queue is not None:
        assert routed is not None
        hop.dead_lettered = sum(routed.values())
        hop.dead_lettered_ids = str(paths["dead_lettered"])
        hop.dead_letters = dead_letters(folder, queue, found["dead_lettered"], stem, files,
                                        empty=not hop.dead_lettered)
    return hop, found


DEAD_LETTER_COLUMNS = ("id", "error", "message", "topic", "partition", "offset",
                       "dlq_partition", "dlq_offset")


def dead_letters(folder: RunFolder, queue: DeadQueue, routed: DataFrame, stem: str,
                 files: list[IdFile], empty: bool) -> DeadLetters:
    """A hop's dead-lettered ids, each with its error and where it was (the original topic's
    partition and offset, and the queue's), into their id file; the queue's records of the
    window without a readable id into theirs; and the errors counted (a few rows to the
    driver)."""
    first_line = F.substring_index(F.col("dlq_message"), "\n", 1)
    detail = (routed.select("id").join(queue.records, "id")
              .select("id", F.col("dlq_error").alias("error"), first_line.alias("message"),
                      F.col("dlq_topic").alias("topic"),
                      F.col("dlq_partition").alias("partition"),
                      F.col("dlq_offset").alias("offset"),
                      F.col("partition").alias("dlq_partition"),
                      F.col("offset").alias("dlq_offset")))
    cols = list(DEAD_LETTER_COLUMNS)
    files.append(IdFile(folder.ids_file("dead_lettered", stem), tuple(cols),
                        id_rows(detail, cols, "id", "dlq_partition", "dlq_offset"),
                        one_task=True, empty=empty))
    errors = [] if empty else [
        DeadLetterError(error=r["error"], message=r["message"], records=int(r["n"]))
        for r in detail.groupBy(*names("id", "error", "message")).agg(F.lit(1).alias("one"))
        .groupBy(*names("error", "message")).agg(F.count("*").alias("n"))
        .orderBy(F.desc("n")).limit(20).collect()]
    out = DeadLetters(topic=queue.topic, connector=queue.connector,
                      context_headers=queue.context_headers, errors=errors)
    bad = queue.unreadable.count()
    if bad:
        target = folder.ids_file("unidentifiable", f"{stem}__dead_letters")
        files.append(IdFile(target, ("partition", "offset", "reason", "error"),
                            id_rows(queue.unreadable.withColumnRenamed("dlq_error", "error"),
                                    ["partition", "offset", "reason", "error"], None,
                                    "partition", "offset")))
        out.unidentifiable, out.unidentifiable_file = bad, str(target)
    return out


def counted_hop(flow: Flow, a: Point, b: Point, ta: TierTally, tb: TierTally) -> HopTally:
    """A hop with a count-only end: record counts compared per bucket."""
    keys = sorted(set(ta.buckets) | set(tb.buckets))
    e = {x: ta.buckets.get(x, 0) for x in keys}
    o = {x: tb.buckets.get(x, 0) for x in keys}
    buckets = HopBuckets(missing={x: max(0, e[x] - o[x]) for x in keys},
                         unexpected={x: max(0, o[x] - e[x]) for x in keys},
                         duplicate={}, expected=e, observed=o)
    return HopTally.model_validate({
        "from": a.name, "to": b.name, "side": flow.side_of(a.name), "exact": False,
        "expected": ta.count, "observed": tb.count, "buckets": buckets,
        **{kind: sum(getattr(buckets, kind).values()) for kind in FINDING_KINDS}})


def name_ids_across_counts(points: list[Point], counts: dict[str, DataFrame | None],
                           hops: list[HopTally], folder: RunFolder) -> None:
    """Name the ids of a loss found by counts, when id tiers stand on both sides of it.

    Between two id tiers with count-only tiers (a Flume agent) in between, the ids missing from
    the later id tier are exactly the records lost somewhere in that stretch. When one hop of
    the stretch lost records and it lost exactly that many, those ids are its loss. When it
    counted more, and later hops of the stretch counted as many more arrivals than departures,
    a counter missed events it passed on: the ids are the loss, and the arrivals are none.
    """
    exact = [i for i, p in enumerate(points) if counts[p.name] is not None]
    for i, j in zip(exact, exact[1:], strict=False):
        if j == i + 1:
            continue  # neighbours: the hop itself is exact
        stretch = hops[i:j]
        lossy = [h for h in stretch if h.missing > 0]
        if len(lossy) != 1:
            continue
        up, down = counts[points[i].name], counts[points[j].name]
        if up is None or down is None:  # not id tiers after all: nothing to name
            continue
        gone = missing(up, down).cache()
        lost = gone.count()
        hop = lossy[0]
        if lost != hop.missing:
            # a counter that missed events it did pass on (an agent killed after delivering a
            # batch, before counting it drained) shows as a loss at one hop and as many
            # unexplained arrivals at a later one; the id tiers around both say which is true
            gained = [h for h in stretch if h is not hop and h.unexpected > 0]
            if not gained or lost != hop.missing - sum(h.unexpected for h in gained):
                continue  # the counts and the ids disagree: leave the loss counted, not named
            hop.counter_gap = CounterGap(counted=hop.missing, lost=lost, passed_on_uncounted={
                h.name: h.unexpected for h in gained})
            for h in gained:
                h.unexpected, h.buckets.unexpected = 0, {}
            hop.missing, hop.buckets.missing = lost, bucket_counts(gone)
        hop.missing_ids = write_ids(
            gone, folder.ids_file("missing", f"{points[i].name}__{points[j].name}"), folder)
        hop.ids_between = [points[i].name, points[j].name]


def retention_split(flow: Flow, window: Window, topic: TopicReplays,
                    counts: dict[str, DataFrame | None], folder: RunFolder
                    ) -> RetentionSplit | None:
    """When retention cut a topic's window, which ids missing from it had been consumed.

    Ids the id tier before the topic has and the topic lost, split by the first id tier after
    it: those there were consumed before retention deleted them; the others are the
    candidates for the production group's retention loss (`kafka_recon.result.build` checks
    them against the offsets deleted unread).
    """
    ranges = [PartitionRange(**o.model_dump()) for o in topic.offsets]
    if not retention_cut(ranges, Window.millis(window.start)):
        return None
    names = [p.name for p in flow.points]
    at = names.index(topic.tier)
    before = next((n for n in reversed(names[:at]) if counts[n] is not None), None)
    after = next((n for n in names[at + 1:] if counts[n] is not None), None)
    here = counts[names[at]]
    up = counts[before] if before else None
    down = counts[after] if after else None
    if up is None or down is None or here is None:
        return None
    lost_from_topic = missing(up, here).cache()
    unread = lost_from_topic.join(down.select("id"), "id", "left_anti").cache()
    path = write_ids(unread, folder.ids_file("missing", f"retention__{names[at]}__{after}"),
                     folder)
    return RetentionSplit.model_validate({
        "topic": names[at], "from": before, "to": after,
        "missing_from_topic": lost_from_topic.count(), "unread": unread.count(),
        "unread_ids": path})
