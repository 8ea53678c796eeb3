"""The evidence of causes: where the records of a finding sit, summarised in one job.

Out of a topic, the lost and re-delivered records' runs of offsets (`runs_of`, over the topic's
records ranked per partition, `rank_topic`); into a topic, the lost records' shape in the
upstream's own order (`upstream_runs`), and the timestamps of a duplicate's copies
(`copies_of`). What each hop needs is asked (`evidence_asks`); every table asked of one topic
is read in one pass over it (`read_off_topic`); `summaries` turns every hop's tables into the
typed evidence of reconcile.json (kafka_recon.runfiles.aggregates), a few rows each."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from pyspark.sql import Column, DataFrame
from pyspark.sql import Window as W
from pyspark.sql import functions as F

from kafka_recon.config import KafkaTier, Point
from kafka_recon.runfiles.aggregates import (
    AfterGrace,
    HopTally,
    OutsideRead,
    Runs,
    Shape,
    Stamps,
)
from kafka_recon.spark.session import names
from kafka_recon.spark.tally import reduce_union
from kafka_recon.window import from_micros, iso_z, micros

K = TypeVar("K")
Evidence = Runs | Shape | Stamps


def rank_topic(topic_records: DataFrame,
               spans: dict[str, dict[str, int]] | None = None) -> DataFrame:
    """The topic's window records with their rank by offset among their partition's: offsets
    skipped by transaction markers or compaction then do not split a run.

    `spans` (the tallies' per partition: records, first and last offset of the same window
    records) spare the sort where it can: a partition whose window records fill their offset
    span has no gap, so a record's rank is its offset's distance from the first. Only the
    partitions with gaps are sorted (and the result is then worth caching: `needs_sort`)."""
    cols = topic_records.select("id", "partition", "offset", "kafka_ts", "event_time")
    gapless = {int(p): s["first_offset"] for p, s in (spans or {}).items() if _fills(s)}
    sorted_rank = F.row_number().over(W.partitionBy("partition").orderBy("offset")).cast("long")
    if not gapless:
        return cols.withColumn("rank", sorted_rank)
    first = F.create_map(*[F.lit(x) for p, o in sorted(gapless.items()) for x in (p, o)])
    filled = F.col("partition").isin(list(gapless))
    ranked = cols.where(filled).withColumn(
        "rank", F.col("offset") - F.element_at(first, F.col("partition")) + 1)
    if len(gapless) == len(spans or {}):
        return ranked
    return ranked.unionByName(cols.where(~filled).withColumn("rank", sorted_rank))


def needs_sort(spans: dict[str, dict[str, int]]) -> bool:
    """Whether `rank_topic` sorts some partition of the topic (one with an offset gap)."""
    return not all(_fills(s) for s in spans.values())


def _fills(span: dict[str, int]) -> bool:
    """Whether a partition's window records fill their offset span: no offset between the
    first and the last is missing."""
    return span["records"] == span["last_offset"] - span["first_offset"] + 1


@dataclass(frozen=True)
class Table:
    """An evidence table and its kind ("runs", "upstream", "copies"), which says its columns
    (`KIND_COLUMNS`): said by what builds it, never asked of the frame (asking is a round trip
    to a Spark Connect server)."""

    kind: str
    frame: DataFrame


# every evidence table's columns, in one shape: a topic's runs (`runs_of`), an upstream's
# (`upstream_runs`), and duplicate copies' stamps (`copies_of`) each fill theirs
EVIDENCE_COLUMNS = {
    "partition": "int", "first_offset": "long", "last_offset": "long", "first_ts": "timestamp",
    "last_ts": "timestamp", "first_id": "string", "last_id": "string",
    "first_time": "timestamp", "last_time": "timestamp", "records": "long", "same": "long",
    "stamped": "long"}


# the columns of each kind of table, of EVIDENCE_COLUMNS
KIND_COLUMNS = {
    "runs": ("partition", "first_offset", "last_offset", "records", "first_ts", "last_ts"),
    "upstream": ("first_id", "last_id", "records", "first_time", "last_time"),
    "copies": ("same", "stamped")}


def runs_of(marked: DataFrame, ranked: DataFrame) -> Table:
    """Where in the topic the marked ids sit, as runs: (partition, first_offset, last_offset,
    records, first_ts, last_ts), a run being consecutive window records of one partition
    (`ranked`: `rank_topic`'s). An id at several offsets (a topic duplicate) marks each.
    """
    return Table("runs", _runs(ranked.join(marked.select("id").distinct(), "id", "left_semi")))


def _runs(hit: DataFrame, *by: str) -> DataFrame:
    """`runs_of` over the topic's records already matched (`hit`), per `by` and partition."""
    return (_islands(hit, *by).groupBy(*names(*by, "partition", "island"))
            .agg(*_run_columns())
            .drop("island"))


def _islands(hit: DataFrame, *by: str) -> DataFrame:
    """Each matched record with its run (`island`): consecutive ranks share one."""
    island = F.col("rank") - F.row_number().over(W.partitionBy(*by, "partition").orderBy("rank"))
    return hit.withColumn("island", island)


def _run_columns() -> list[Column]:
    """A run's columns as aggregates of its records."""
    return [F.min("offset").alias("first_offset"), F.max("offset").alias("last_offset"),
            F.count(F.lit(1)).alias("records"), F.min("kafka_ts").alias("first_ts"),
            F.max("kafka_ts").alias("last_ts")]


def _copies_columns() -> list[Column]:
    """A duplicate's columns (`copies_of`) as aggregates of its copies."""
    # min == max: one timestamp for every copy, without a distinct count's extra shuffle
    return [(F.min("kafka_ts") == F.max("kafka_ts")).cast("long").alias("same"),
            F.max((F.col("kafka_ts") == F.col("event_time")).cast("long")).alias("stamped")]


# The upstream's records are ranked in time slices of about this many records each
# (`upstream_slice`), at most MOST_SLICES of them (their counts are summed in order by one task)
SLICE_RECORDS = 64
MOST_SLICES = 1 << 20
MINUTE_US = 60_000_000


def upstream_slice(records: int, span: timedelta) -> int:
    """The time slice, in microseconds, that `upstream_runs` ranks an upstream tier of
    `records` records over `span` in: about SLICE_RECORDS records each on average.

    Only the slices holding a lost record are sorted. In minutes, 1000 records lost at random
    from 10M in a day touched 726 of its 1440 minutes: 5M records were shuffled and sorted to
    rank 1000 (the upstream's job 19.1 s; in these slices 11.3 s,
    docs/performance-history.md). A loss of whole batches touches few slices either way."""
    slices = min(max(1, records // SLICE_RECORDS), MOST_SLICES)
    return max(1, -(-int(span.total_seconds() * 1_000_000) // slices))


def upstream_runs(marked: DataFrame, records: DataFrame, unique: bool = False,
                  slice_us: int = MINUTE_US) -> Table:
    """Where the marked ids sit among an upstream tier's records in the order they were made
    (event time, then id), as runs: (first_id, last_id, records, first_time, last_time), a run
    being consecutive records all marked. Lost batches make long runs; records rejected one
    by one (too large, unserializable) make isolated singles.

    `unique`: the tier holds each id once (its tally's records equal its distinct ids), so its
    records are already each id's first event and need no grouping by id. `slice_us`: the
    time slice the records are ranked in (`upstream_slice`); the runs are the same whatever
    it is."""
    hit = marked.select("id").distinct()
    firsts = records.select("id", "event_time") if unique else \
        records.groupBy(*names("id")).agg(F.min("event_time").alias("event_time"))
    # a record's rank in two levels, so that no single task sorts the whole window: the
    # records of the time slices before its own (a row per slice), plus its place within its
    # slice. Only the slices holding a marked record are sorted: the others' ranks are never
    # read. One pass over the records counts each slice's and says which hold a marked one;
    # a second ranks the records of those
    firsts = firsts.withColumn("slice", F.floor(F.unix_micros("event_time") / F.lit(slice_us)))
    per_slice = (firsts.join(hit.withColumn("marked", F.lit(True)), "id", "left")
                 .groupBy(*names("slice"))
                 .agg(F.count(F.lit(1)).alias("n"),
                      F.max(F.col("marked").isNotNull()).alias("marked")))
    before = per_slice.select("slice", "marked", F.coalesce(F.sum("n").over(
        W.orderBy("slice").rowsBetween(W.unboundedPreceding, -1)), F.lit(0)).alias("before")
    ).where(F.col("marked"))
    ranked = firsts.join(F.broadcast(before), "slice").select(
        "id", "event_time", (F.col("before") + F.row_number().over(
            W.partitionBy("slice").orderBy("event_time", "id"))).alias("rank"))
    hit_ranked = ranked.join(hit, "id", "left_semi")
    island = F.col("rank") - F.row_number().over(W.orderBy("rank"))
    return Table("upstream", hit_ranked.withColumn("island", island).groupBy(*names("island"))
                 .agg(F.min_by("id", "rank").alias("first_id"),
                      F.max_by("id", "rank").alias("last_id"),
                      F.count(F.lit(1)).alias("records"),
                      F.min("event_time").alias("first_time"),
                      F.max("event_time").alias("last_time"))
                 .drop("island"))


def copies_of(dup: DataFrame, topic_records: DataFrame) -> Table:
    """Per id the topic holds more than once: whether every copy has one Kafka timestamp
    (`same`: the producer sent the very same record again, as a client retry keeps the
    original's CreateTime) and whether a copy carries its event time as its timestamp
    (`stamped`: a producer that stamps records itself, when equal timestamps prove nothing)."""
    return Table("copies", topic_records.join(dup.select("id").distinct(), "id", "left_semi")
                 .groupBy(*names("id")).agg(*_copies_columns()))


@dataclass(frozen=True)
class Tagged(Generic[K]):
    """Several evidence tables in one frame: each row carries its table's place (`of`) in
    `tables`, which holds each table's key and kind (the key None: read, but not asked for)."""

    frame: DataFrame
    tables: list[tuple[K | None, str]]


def read_off_topic(ranked: DataFrame, asks: dict[K, tuple[str, DataFrame]]) -> Tagged[K]:
    """Every evidence table asked of one topic, read in one pass over its records (`ranked`:
    `rank_topic`'s): by key, its kind ("runs": `runs_of`, "copies": `copies_of`) and its
    marked ids.

    A table per hop and kind would scan the topic once each (a hop into the topic and the hop
    out of it ask four tables between them), each after a job of its own that broadcasts its
    ids. Here every ask's ids are tagged and broadcast together, the topic's records matched
    once, and both kinds read off that one match in one aggregation: every tag's runs, and
    (when copies are asked) every tag's copies, the tables not asked for left out by
    `summaries`."""
    sets: list[DataFrame] = []   # the distinct marked sets: a hop's duplicates ask two tables
    place: dict[K, tuple[str, int]] = {}
    for key, (kind, marked) in asks.items():
        tag = next((t for t, m in enumerate(sets) if m is marked), len(sets))
        if tag == len(sets):
            sets.append(marked)
        place[key] = (kind, tag)
    n = len(sets)
    tagged = reduce_union([m.select("id", F.lit(t).alias("of"))
                           for t, m in enumerate(sets)]).distinct()
    hit = ranked.join(tagged, "id")
    tables: list[tuple[K | None, str]] = [(None, "runs")] * n
    if not any(kind == "copies" for kind, _ in place.values()):
        frame = _shaped(_runs(hit, "of"), F.col("of"), "runs")
    else:
        # both kinds in one aggregation (grouping sets): two aggregations of one match would
        # each scan the topic
        tables += [(None, "copies")] * n
        rows = _islands(hit, "of").groupingSets(
            [names("of", "partition", "island"), names("of", "id")],
            *names("of", "partition", "island", "id")
        ).agg(*_run_columns(), *_copies_columns(), F.grouping("id").alias("is_run"))
        run = F.col("is_run") == 1
        frame = _shaped(rows.select(
            *[F.when(run, F.col(c)).alias(c) for c in KIND_COLUMNS["runs"]],
            *[F.when(~run, F.col(c)).alias(c) for c in ("id", *KIND_COLUMNS["copies"])],
            F.when(run, F.col("of")).otherwise(F.col("of") + n).alias("of")), F.col("of"),
            "runs", "copies")
    for key, (kind, tag) in place.items():
        tables[tag + (n if kind == "copies" else 0)] = (key, kind)
    return Tagged(frame, tables)


MAX_RUNS = 50  # the largest runs reach the driver: evidence, never the record-level answer


def summary(table: Table) -> Evidence:
    """`summaries` of one evidence table."""
    return summaries({"table": table})["table"]


def _shaped(table: DataFrame, of: Column, *kinds: str) -> DataFrame:
    """The rows of a table of `kinds` in every table's columns (`EVIDENCE_COLUMNS`), tagged
    `of`."""
    has = {c for k in kinds for c in KIND_COLUMNS[k]}
    return table.select(*[(F.col(c) if c in has else F.lit(None)).cast(t).alias(c)
                          for c, t in EVIDENCE_COLUMNS.items()], of.alias("of"))


def summaries(tables: dict[K, Table], tagged: Sequence[Tagged[K]] = ()
              ) -> dict[K, Evidence]:
    """Every evidence table of a run summarised in one Spark job, whatever hops need them:
    for runs, their totals and the largest (at most MAX_RUNS rows each to the driver); for
    copies (`copies_of`), how many ids, how many under one timestamp, how many stamped with
    their event time. `tables` one by one, `tagged` several in one frame
    (`read_off_topic`)."""
    parts = [Tagged(_shaped(t.frame, F.lit(0), t.kind), [(k, t.kind)])
             for k, t in tables.items()]
    parts += tagged
    if not parts:
        return {}
    slots: list[tuple[K | None, str]] = []  # every table's key and kind, by its place (`of`)
    frames = []
    for part in parts:
        frames.append(part.frame.withColumn("of", F.col("of") + len(slots)))
        slots += part.tables
    rows = reduce_union(frames)
    every = W.partitionBy("of")
    order = every.orderBy(F.desc("records"), "partition", "first_offset", "first_time",
                          "first_id")
    # totals ride along every row kept, so that one job answers all: the largest runs of each
    # table, and a copies table's first row (nothing of it but its totals is read)
    n = F.row_number().over(order)
    kept = rows.select(
        "*", n.alias("n"), F.count(F.lit(1)).over(every).alias("t_rows"),
        F.sum("records").over(every).alias("t_records"),
        F.size(F.collect_set("partition").over(every)).alias("t_partitions"),
        F.sum((F.col("records") == 1).cast("long")).over(every).alias("t_singles"),
        F.min("first_time").over(every).alias("t_first_time"),
        F.max("last_time").over(every).alias("t_last_time"),
        F.sum("same").over(every).alias("t_same"),
        F.sum("stamped").over(every).alias("t_stamped"),
    ).where((F.col("n") == 1) | (F.col("records").isNotNull() & (F.col("n") <= MAX_RUNS)))
    times = ("first_time", "last_time", "first_ts", "last_ts", "t_first_time", "t_last_time")
    kept = kept.withColumns({c: micros(c) for c in times})
    out: dict[K, dict[str, Any]] = {k: _empty_summary(kind) for k, kind in slots
                                    if k is not None}
    # a few rows per table, put in order here: a sort by Spark would cost a job of its own
    for r in sorted(kept.collect(), key=lambda r: (r["of"], r["n"])):
        key, kind = slots[r["of"]]
        if key is None:
            continue
        into = out[key]
        if kind == "copies":
            into.update(ids=int(r["t_rows"]), same_timestamp=int(r["t_same"] or 0),
                        stamped_with_event_time=int(r["t_stamped"] or 0))
            continue
        if r["n"] == 1:
            into.update(runs=int(r["t_rows"]), records=int(r["t_records"] or 0))
            if kind == "upstream":
                into.update(singles=int(r["t_singles"] or 0),
                            first_time=_iso(r["t_first_time"]),
                            last_time=_iso(r["t_last_time"]))
            else:
                into["partitions"] = int(r["t_partitions"])
        into["largest"].append(
            {"first_id": str(r["first_id"]), "last_id": str(r["last_id"]),
             "records": int(r["records"]), "first_time": _iso(r["first_time"]),
             "last_time": _iso(r["last_time"])} if kind == "upstream" else
            {"partition": int(r["partition"]), "first_offset": int(r["first_offset"]),
             "last_offset": int(r["last_offset"]), "records": int(r["records"]),
             "first_ts": _iso(r["first_ts"]), "last_ts": _iso(r["last_ts"])})
    model: dict[str, type[Evidence]] = {"copies": Stamps, "upstream": Shape, "runs": Runs}
    return {k: model[kind].model_validate(out[k]) for k, kind in slots if k is not None}


def _empty_summary(kind: str) -> dict[str, Any]:
    """What `summaries` says of an empty table of this kind."""
    if kind == "copies":
        return {"ids": 0, "same_timestamp": 0, "stamped_with_event_time": 0}
    if kind == "upstream":
        return {"runs": 0, "records": 0, "singles": 0, "first_time": None, "last_time": None,
                "largest": []}
    return {"runs": 0, "records": 0, "partitions": 0, "largest": []}


def _iso(t: int | None) -> str | None:
    return iso_z(from_micros(t)) if t is not None else None


@dataclass(frozen=True)
class Ask:
    """An evidence table a hop needs, of its `marked` ids: their runs in a topic ("runs"), the
    stamps of their copies in it ("copies"), or their shape in the upstream's own order
    ("upstream"); `end` says whose records it reads, the hop's first ("a") or last ("b")."""

    kind: str
    end: str
    marked: DataFrame


def evidence_asks(hop: HopTally, a: Point, b: Point, found: dict[str, DataFrame]
                  ) -> dict[str, Ask]:
    """The evidence of a cause a hop with findings needs (kafka_recon.result.causes reads it),
    under the hop's keys: out of a topic, where the lost and re-delivered records sit in it;
    into a topic, the lost records' shape in the upstream's own order (the upstream's runs,
    when it is a topic too), and where the copies of a duplicate sit in the topic and under
    which timestamps. Every hop's asks are read together: each topic's in one pass
    (`read_off_topic`), all summarised in one job (`summaries`)."""
    asks: dict[str, Ask] = {}
    if isinstance(b.tier, KafkaTier):
        if hop.missing:
            if isinstance(a.tier, KafkaTier):  # from a topic: where the lost records sat
                asks["missing_runs"] = Ask("runs", "a", found["missing"])
            else:
                asks["missing_shape"] = Ask("upstream", "a", found["missing"])
        if hop.duplicate:
            asks["duplicate_runs"] = Ask("runs", "b", found["duplicate"])
            asks["duplicate_stamps"] = Ask("copies", "b", found["duplicate"])
        if hop.unexpected:
            asks["unexpected_runs"] = Ask("runs", "b", found["unexpected"])
    elif isinstance(a.tier, KafkaTier):
        if hop.missing:
            asks["missing_runs"] = Ask("runs", "a", found["missing"])
        if hop.duplicate:
            asks["duplicate_runs"] = Ask("runs", "a", found["duplicate"])
    return asks


def after_grace(missing: DataFrame, beyond: DataFrame) -> Table:
    """Of the ids lost into a topic, those the topic holds after its grace (`beyond`: its
    identifiable records of the window that arrived after the close, inside the margin the
    replay read), each with its first arrival, in `upstream_runs`' columns: an id is a run of
    its own (first_id = last_id, one record, first_time = last_time = its arrival). So
    `summaries` reads them in the one evidence job: its runs are the ids, its first and last
    time the first and last arrival (`late_arrivals`)."""
    arrived = beyond.groupBy(*names("id")).agg(F.min("kafka_ts").alias("at"))
    return Table("upstream", missing.select("id").distinct().join(arrived, "id")
                 .select(F.col("id").alias("first_id"), F.col("id").alias("last_id"),
                         F.lit(1).cast("long").alias("records"),
                         F.col("at").alias("first_time"), F.col("at").alias("last_time")))


def late_arrivals(shape: Shape, closed_at: datetime) -> AfterGrace | None:
    """`summaries`' account of an `after_grace` table, as reconcile.json keeps it; None when
    no lost record arrived after the close."""
    if not shape.records or shape.first_time is None or shape.last_time is None:
        return None
    return AfterGrace(records=shape.records, closed_at=iso_z(closed_at),
                      first=shape.first_time, last=shape.last_time)


def outside_read(shape: Shape, bound: datetime) -> OutsideRead | None:
    """`summaries`' account of a loss search's `after_grace` table (lost ids found before or
    past the offsets replayed, with their own Kafka timestamps; `bound`: the time the offsets
    were found by on that side); None when it found none."""
    if not shape.records or shape.first_time is None or shape.last_time is None:
        return None
    return OutsideRead(records=shape.records, bound=iso_z(bound), first=shape.first_time,
                       last=shape.last_time)


def inside_upstream(unexpected: DataFrame, upstream: DataFrame) -> int | None:
    """How many ids from nowhere lie strictly between the upstream's lowest and highest id, as
    numbers (None when the upstream's ids are not numbers): gaps in its own sequence. One
    aggregate row reaches the driver, then one count."""
    number = F.col("id").try_cast("decimal(38,0)")
    lo, hi = upstream.agg(F.min(number), F.max(number)).first() or (None, None)
    if lo is None or hi is None:
        return None
    return unexpected.where((number > F.lit(lo)) & (number < F.lit(hi))).count()
