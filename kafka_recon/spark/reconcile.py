"""Step 3, reconcile: ids per tier and bucket to per-hop missing, unexpected and duplicate records.

The `spark-submit` entry point is `spark_jobs/reconcile.py`; this module is the step itself.

Every id tier's ids are grouped by id once (`compare`): each id's row says how many times each
tier holds it, and every hop's missing, unexpected and duplicate ids are read off that row
(`marks`), exactly. Every such id is written in full to a CSV file by the executors, all files in
one job, never collected. Only per-bucket counts reach the driver; `kafka_recon.result.build`
turns them into the result.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from kafka_recon.config import Flow, Point
    from kafka_recon.runfolder import RunFolder
    from kafka_recon.window import Window

# An SQL tier is read in this many event-time slices, plus one for whatever they do not cover.
# Each slice is a query of its own: on a table without an index on its event time each scans
# the table. At 1M rows (bench.tune, bench/tune-jdbc.json) 2 slices gave the fastest median
# run, 75.5 s against 76.7 (1), 78.2 (4) and 81.9 (8): the first three within the noise.
JDBC_SLICES = 2
K = TypeVar("K")


# ------------------------------------------------------------------ pure transforms
def bucket_of(col: Column, start: datetime, bucket_seconds: int) -> Column:
    """The start of the bucket a time falls in; buckets are aligned on the window start."""
    from pyspark.sql import functions as F

    origin = F.lit(int(start.timestamp()))
    secs = F.unix_timestamp(col)
    return F.timestamp_seconds(origin + F.floor((secs - origin) / bucket_seconds)
                               * bucket_seconds)


def identifiable(df: DataFrame) -> Column:
    from pyspark.sql import functions as F

    return F.col("id").isNotNull() & F.col("event_time").isNotNull()


def window_records(df: DataFrame, start: datetime, end: datetime,
                   bucket_seconds: int) -> DataFrame:
    """The tier's identifiable records whose event time is in [start, end), with their bucket."""
    from pyspark.sql import functions as F

    return (df.where(identifiable(df) & (F.col("event_time") >= F.lit(start))
                     & (F.col("event_time") < F.lit(end)))
            .withColumn("bucket", bucket_of(F.col("event_time"), start, bucket_seconds)))


def missing(up: DataFrame, down: DataFrame) -> DataFrame:
    """Ids the upstream tier has and the downstream tier lacks (a left anti-join): for the
    stretches the one comparison does not cover (ids across count-only tiers, retention)."""
    return up.select("id", "bucket").join(down.select("id"), "id", "left_anti")


# ------------------------------------------------------------------ the one comparison
def compare(records: list[DataFrame], collapse: frozenset[int] = frozenset(),
            dropping: frozenset[int] = frozenset()) -> DataFrame:
    """Every id of every id tier in one row: (id, n0, b0, n1, b1, ...), `n<i>` how many times
    id tier i holds the id (0: not at all), `b<i>` the bucket of its first event there; for a
    tier in `dropping` (a topic whose records say whether the processor after it drops them on
    purpose), `d<i>` how many of those records are declared drops.

    The tiers' window records are stacked and grouped by id once: one shuffle answers every
    hop, where a join per hop would re-read and re-shuffle each tier for each comparison. A
    tier in `collapse` (a change stream) counts an id once however many changes carry it."""
    from functools import reduce

    from pyspark.sql import functions as F

    tagged = reduce(lambda x, y: x.unionByName(y),
                    [df.select("id", "bucket", F.lit(i).alias("tier"),
                               (F.col("dropped") if i in dropping else F.lit(False))
                               .alias("dropped"))
                     for i, df in enumerate(records)])
    aggs: list[Column] = []
    for i in range(len(records)):
        n = F.count(F.when(F.col("tier") == i, 1))
        aggs += [(F.least(n, F.lit(1)) if i in collapse else n).alias(f"n{i}"),
                 F.min(F.when(F.col("tier") == i, F.col("bucket"))).alias(f"b{i}")]
        if i in dropping:
            aggs.append(F.count(F.when((F.col("tier") == i) & F.col("dropped"), 1))
                        .alias(f"d{i}"))
    return tagged.groupBy("id").agg(*aggs)


def marks(compared: DataFrame, tiers: int, hops: list[tuple[int, int, list[int]]],
          dropping: frozenset[int] = frozenset()) -> DataFrame:
    """(id, kind, at, bucket, value): what each id counts for, read off its one compared row.

    `present` at tier i (value 1): the tier holds the id, in the bucket of its first event
    there. For each hop k = (up, down, before) between two id tiers:

    - `missing` at k: the up tier has it and the down tier lacks it (bucket: up's); when up
      is in `dropping` (a processor's hop with declared drops), only a record of it that is
      not a declared drop makes it missing, and an id whose every record up is one, absent
      down, is `filtered` at k instead (bucket: up's);
    - `unexpected` at k: the down tier has it and no id tier in `before` (every id tier up to
      the hop's start) does: someone else wrote it (bucket: down's);
    - `duplicate` at k, value the copies down holds beyond what up already had: a duplicate
      belongs to the tier where it first appears, so an id twice in the topic and twice in the
      sink is the topic's, not the sink's (bucket: down's).
    """
    from functools import reduce

    from pyspark.sql import functions as F

    def n(i: int) -> Column:
        return F.col(f"n{i}")

    def b(i: int) -> Column:
        return F.col(f"b{i}")

    def mark(cond: Column, kind: str, at: int, bucket: Column,
             value: Column | None = None) -> Column:
        return F.when(cond, F.struct(F.lit(kind).alias("kind"), F.lit(at).alias("at"),
                                     bucket.alias("bucket"),
                                     (value if value is not None else F.lit(1))
                                     .cast("long").alias("value")))

    cols = [mark(n(i) > 0, "present", i, b(i)) for i in range(tiers)]
    for k, (up, down, before) in enumerate(hops):
        base = F.greatest(n(up), F.lit(1))
        nowhere = reduce(lambda x, y: x & y, [n(t) == 0 for t in before])
        if up in dropping:
            kept = n(up) - F.col(f"d{up}")
            cols += [mark((kept > 0) & (n(down) == 0), "missing", k, b(up)),
                     mark((n(up) > 0) & (kept == 0) & (n(down) == 0), "filtered", k, b(up))]
        else:
            cols.append(mark((n(up) > 0) & (n(down) == 0), "missing", k, b(up)))
        cols += [mark((n(down) > 0) & nowhere, "unexpected", k, b(down)),
                 mark(n(down) > base, "duplicate", k, b(down), n(down) - base)]
    # explode, then drop the empty slots: a lambda (`F.filter`) would run interpreted, row by row
    return (compared.select("id", F.explode(F.array(*cols)).alias("m"))
            .where(F.col("m").isNotNull())
            .select("id", "m.kind", "m.at", "m.bucket", "m.value"))


def ids_of(compared: DataFrame, at: int) -> DataFrame:
    """(id, n, bucket): the ids id tier `at` holds, how many times, in the bucket of the first."""
    from pyspark.sql import functions as F

    return compared.where(F.col(f"n{at}") > 0).select(
        "id", F.col(f"n{at}").alias("n"), F.col(f"b{at}").alias("bucket"))


def record_marks(raw: DataFrame, at: int, start: datetime, end: datetime, bucket_seconds: int,
                 time_col: str, is_topic: bool) -> DataFrame:
    """(kind, at, bucket, part, offset, value) per record of one id tier: `record` for each
    window record (its event's bucket); `unidentifiable` for each record whose id or event time
    cannot be read (bucketed by the time that is known, null when none is); for the topic,
    `late` for each window record that reached it after the window closed, and `span` for each
    window record under its partition (`part`, with its offset)."""
    from pyspark.sql import functions as F

    ok = identifiable(raw)
    inside = ok & (F.col("event_time") >= F.lit(start)) & (F.col("event_time") < F.lit(end))
    bucket = bucket_of(F.col("event_time"), start, bucket_seconds)
    none = F.lit(None)

    def mark(cond: Column, kind: str, when: Column, part: Column = none) -> Column:
        return F.when(cond, F.struct(F.lit(kind).alias("kind"),
                                     when.cast("timestamp").alias("bucket"),
                                     part.cast("int").alias("part"),
                                     (F.col("offset") if is_topic else none).cast("long")
                                     .alias("offset")))

    cols = [mark(inside, "record", bucket),
            mark(~ok, "unidentifiable", bucket_of(F.col(time_col), start, bucket_seconds))]
    if is_topic:
        cols += [mark(inside & (F.col("kafka_ts") >= F.lit(end)), "late", bucket),
                 mark(inside, "span", none, F.col("partition"))]
    return (raw.select(F.explode(F.array(*cols)).alias("m")).where(F.col("m").isNotNull())
            .select("m.kind", F.lit(at).alias("at"), "m.bucket", "m.part", "m.offset",
                    F.lit(1).cast("long").alias("value")))


def tally(df: DataFrame) -> DataFrame:
    """(kind, at, bucket[, part], n[, first_offset, last_offset]): marks summed per kind,
    place and bucket (and partition, for record marks): a few rows."""
    from pyspark.sql import functions as F

    keys = ["kind", "at", "bucket", *(["part"] if "part" in df.columns else [])]
    aggs = [F.sum("value").alias("n")]
    if "offset" in df.columns:
        aggs += [F.min("offset").alias("first_offset"), F.max("offset").alias("last_offset")]
    return df.groupBy(*keys).agg(*aggs)


def late(topic: DataFrame, end: datetime) -> DataFrame:
    """Window records that reached the topic after the window closed, inside grace."""
    from pyspark.sql import functions as F

    return topic.where(F.col("kafka_ts") >= F.lit(end)).select("id", "bucket")


def per_bucket(df: DataFrame, value: str | None = None) -> DataFrame:
    from pyspark.sql import functions as F

    agg = F.sum(value) if value else F.count(F.lit(1))
    return df.groupBy("bucket").agg(agg.alias("n"))


def rank_topic(topic_records: DataFrame,
               spans: dict[str, dict[str, int]] | None = None) -> DataFrame:
    """The topic's window records with their rank by offset among their partition's: offsets
    skipped by transaction markers or compaction then do not split a run.

    `spans` (the tallies' per partition: records, first and last offset of the same window
    records) spare the sort where it can: a partition whose window records fill their offset
    span has no gap, so a record's rank is its offset's distance from the first. Only the
    partitions with gaps are sorted (and the result is then worth caching: `needs_sort`)."""
    from pyspark.sql import Window as W
    from pyspark.sql import functions as F

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


def runs_of(marked: DataFrame, ranked: DataFrame) -> DataFrame:
    """Where in the topic the marked ids sit, as runs: (partition, first_offset, last_offset,
    records, first_ts, last_ts), a run being consecutive window records of one partition
    (`ranked`: `rank_topic`'s). An id at several offsets (a topic duplicate) marks each.
    """
    from pyspark.sql import Window as W
    from pyspark.sql import functions as F

    hit = ranked.join(marked.select("id").distinct(), "id", "left_semi")
    island = F.col("rank") - F.row_number().over(W.partitionBy("partition").orderBy("rank"))
    return (hit.withColumn("island", island).groupBy("partition", "island")
            .agg(F.min("offset").alias("first_offset"), F.max("offset").alias("last_offset"),
                 F.count(F.lit(1)).alias("records"), F.min("kafka_ts").alias("first_ts"),
                 F.max("kafka_ts").alias("last_ts"))
            .drop("island"))


def upstream_runs(marked: DataFrame, records: DataFrame) -> DataFrame:
    """Where the marked ids sit among an upstream tier's records in the order they were made
    (event time, then id), as runs: (first_id, last_id, records, first_time, last_time), a run
    being consecutive records all marked. Lost batches make long runs; records rejected one
    by one (too large, unserializable) make isolated singles."""
    from pyspark.sql import Window as W
    from pyspark.sql import functions as F

    firsts = records.groupBy("id").agg(F.min("event_time").alias("event_time"))
    # ranked in two levels, so that no single task sorts the whole window: within each minute
    # of event time, plus the records of the minutes before (a row per minute)
    minute = F.date_trunc("minute", F.col("event_time"))
    local = firsts.withColumn("minute", minute).withColumn(
        "local", F.row_number().over(W.partitionBy("minute").orderBy("event_time", "id")))
    before = (firsts.groupBy(minute.alias("minute")).agg(F.count(F.lit(1)).alias("n"))
              .select("minute", F.coalesce(F.sum("n").over(
                  W.orderBy("minute").rowsBetween(W.unboundedPreceding, -1)), F.lit(0))
                  .alias("before")))
    ranked = local.join(F.broadcast(before), "minute").select(
        "id", "event_time", (F.col("before") + F.col("local")).alias("rank"))
    hit = ranked.join(marked.select("id").distinct(), "id", "left_semi")
    island = F.col("rank") - F.row_number().over(W.orderBy("rank"))
    return (hit.withColumn("island", island).groupBy("island")
            .agg(F.min_by("id", "rank").alias("first_id"), F.max_by("id", "rank").alias("last_id"),
                 F.count(F.lit(1)).alias("records"), F.min("event_time").alias("first_time"),
                 F.max("event_time").alias("last_time"))
            .drop("island"))


def copies_of(dup: DataFrame, topic_records: DataFrame) -> DataFrame:
    """Per id the topic holds more than once: whether every copy has one Kafka timestamp
    (`same`: the producer sent the very same record again, as a client retry keeps the
    original's CreateTime) and whether a copy carries its event time as its timestamp
    (`stamped`: a producer that stamps records itself, when equal timestamps prove nothing)."""
    from pyspark.sql import functions as F

    # min == max: one timestamp for every copy, without a distinct count's extra shuffle
    return (topic_records.join(dup.select("id").distinct(), "id", "left_semi")
            .groupBy("id").agg((F.min("kafka_ts") == F.max("kafka_ts")).cast("long")
                               .alias("same"),
                               F.max((F.col("kafka_ts") == F.col("event_time")).cast("long"))
                               .alias("stamped")))


MAX_RUNS = 50  # the largest runs reach the driver: evidence, never the record-level answer


def summary(table: DataFrame) -> dict[str, Any]:
    """`summaries` of one evidence table."""
    return summaries({"table": table})["table"]


# every evidence table's columns, in one shape: a topic's runs (`runs_of`), an upstream's
# (`upstream_runs`), and duplicate copies' stamps (`copies_of`) each fill theirs
EVIDENCE_COLUMNS = {
    "partition": "int", "first_offset": "long", "last_offset": "long", "first_ts": "timestamp",
    "last_ts": "timestamp", "first_id": "string", "last_id": "string",
    "first_time": "timestamp", "last_time": "timestamp", "records": "long", "same": "long",
    "stamped": "long"}


def summaries(tables: dict[K, DataFrame]) -> dict[K, dict[str, Any]]:
    """Every evidence table of a run summarised in one Spark job, whatever hops need them:
    for runs, their totals and the largest (at most MAX_RUNS rows each to the driver); for
    copies (`copies_of`), how many ids, how many under one timestamp, how many stamped with
    their event time. A table's kind is told by its columns."""
    from pyspark.sql import Window as W
    from pyspark.sql import functions as F

    if not tables:
        return {}
    keys = list(tables)  # each table tagged by its place among them
    kinds = ["copies" if "same" in df.columns else "upstream" if "first_id" in df.columns
             else "runs" for df in tables.values()]
    rows = reduce_union([
        df.select(*[(F.col(c) if c in df.columns else F.lit(None)).cast(t).alias(c)
                    for c, t in EVIDENCE_COLUMNS.items()], F.lit(i).alias("of"))
        for i, df in enumerate(tables.values())])
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
    out = {k: _empty_summary(kind) for k, kind in zip(keys, kinds, strict=True)}
    # a few rows per table, put in order here: a sort by Spark would cost a job of its own
    for r in sorted(kept.collect(), key=lambda r: (r["of"], r["n"])):
        kind, into = kinds[r["of"]], out[keys[r["of"]]]
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
    return out


def _empty_summary(kind: str) -> dict[str, Any]:
    """What `summaries` says of an empty table of this kind."""
    if kind == "copies":
        return {"ids": 0, "same_timestamp": 0, "stamped_with_event_time": 0}
    if kind == "upstream":
        return {"runs": 0, "records": 0, "singles": 0, "first_time": None, "last_time": None,
                "largest": []}
    return {"runs": 0, "records": 0, "partitions": 0, "largest": []}


def _iso(t: datetime | None) -> str | None:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ") if t is not None else None


# ------------------------------------------------------------------ I/O
def read_sql_tier(spark: SparkSession, tier: Any, window: Window) -> DataFrame:
    """The tier's id query, read by Spark over JDBC in parallel time slices."""
    from pyspark.sql import functions as F

    from kafka_recon.sources.connections import resolve
    from kafka_recon.sources.jdbc import bind_window, jdbc_source, slice_predicates
    from kafka_recon.spark.records import event_time, normalise_id

    src = jdbc_source(resolve(tier.conn))
    start, end = (t.replace(tzinfo=None) for t in (window.start, window.end))
    # the database turns the id into text: a JDBC driver would read a SQLite INTEGER as a
    # 32-bit int and a NUMERIC as a double, cutting 64-bit and longer ids
    table = (f"(SELECT CAST(id AS TEXT) AS id, event_time FROM "
             f"({bind_window(tier.ids, start, end)}) kafka_recon_ids) kafka_recon_q")
    # and Spark reads it as text: the SQLite driver types an expression column NUMERIC
    df = spark.read.jdbc(src.url, table, predicates=slice_predicates(window, JDBC_SLICES),
                         properties={**src.properties, "customSchema": "id STRING"})
    return df.select(normalise_id(F.col("id")).alias("id"),
                     event_time(F.col("event_time"), "iso8601").alias("event_time"))


def csv_field(value: Column) -> Column:
    """A value as an RFC 4180 field: quoted, quotes doubled, when it holds a comma, a quote or a
    line break; nothing trimmed; an empty text as `""` (a line of its own would read as no
    row at all), null as an empty field."""
    from pyspark.sql import functions as F

    text = value.cast("string")
    return (F.when(text.isNull(), F.lit(""))
            .when(text.rlike('^$|[",\r\n]'),
                  F.concat(F.lit('"'), F.regexp_replace(text, '"', '""'), F.lit('"')))
            .otherwise(text))


@dataclass(frozen=True)
class IdFile:
    """One id file to write: where, its header, and its rows as (line, s, p, o), sorted by the
    keys s (text), then p and o (numbers)."""

    target: Path
    columns: tuple[str, ...]
    rows: DataFrame
    # rows read off the findings' cache: one task reads them all. A task per cached partition
    # per file (50 at 1M for six files of a few hundred ids) cost more in task overhead than
    # the rows did; the file is written by one task anyway
    one_task: bool = False


def id_rows(df: DataFrame, columns: list[str], s: str | None, p: str | None = None,
            o: str | None = None) -> DataFrame:
    """A DataFrame's rows as an id file's CSV lines with their sort keys."""
    from pyspark.sql import functions as F

    def key(c: str | None, kind: str) -> Column:
        return (F.col(c) if c else F.lit(None)).cast(kind)

    line = F.concat_ws(",", *[csv_field(F.date_format(F.col(c), "yyyy-MM-dd'T'HH:mm:ss.SSSXXX")
                                        if c == "event_time" else F.col(c)) for c in columns])
    return df.select(line.alias("line"), key(s, "string").alias("s"), key(p, "long").alias("p"),
                     key(o, "long").alias("o"))


def write_id_files(spark: SparkSession, files: list[IdFile], scratch: Path) -> None:
    """Every id file in one Spark job, each one sorted RFC 4180 CSV with its header, written by
    the executors (never through the driver): the rows of a file are hashed to one task, which
    writes them in order under the file's number; the driver then only moves each file in
    place."""
    from functools import reduce

    from pyspark.sql import functions as F

    if not files:
        return
    # the headers made in the JVM: a DataFrame of Python rows would start a Python worker per
    # task to unpickle them (about 1 s each, the longest tasks of the job)
    n = F.col("id").cast("int")
    headers = spark.range(len(files), numPartitions=1).select(
        n.alias("file"), F.lit(0).alias("ord"),
        F.element_at(F.array(*[F.lit(",".join(f.columns)) for f in files]), n + 1).alias("line"),
        F.lit(None).cast("string").alias("s"), F.lit(None).cast("long").alias("p"),
        F.lit(None).cast("long").alias("o"))
    rows = reduce(lambda x, y: x.unionByName(y),
                  [(f.rows.coalesce(1) if f.one_task else f.rows)
                   .select(F.lit(i).alias("file"), F.lit(1).alias("ord"), "line", "s", "p", "o")
                   for i, f in enumerate(files)], headers)
    shutil.rmtree(scratch, ignore_errors=True)
    (rows.repartition("file").sortWithinPartitions("file", "ord", "s", "p", "o", "line")
     .select("file", "line").write.mode("overwrite").partitionBy("file")
     .option("lineSep", "\n").text(str(scratch)))
    for i, f in enumerate(files):
        parts = sorted((scratch / f"file={i}").glob("part-*"))
        if len(parts) != 1:  # a file's rows are hashed to one task: one part, always
            raise RuntimeError(f"id file {f.target.name}: Spark wrote {len(parts)} parts, "
                               "expected 1")
        f.target.parent.mkdir(parents=True, exist_ok=True)
        parts[0].replace(f.target)
    shutil.rmtree(scratch, ignore_errors=True)


def write_ids(df: DataFrame, target: Path, folder: RunFolder) -> str:
    """One id file of ids alone, as `write_id_files` writes them."""
    write_id_files(df.sparkSession, [IdFile(target, ("id",), id_rows(df, ["id"], "id"))],
                   folder.path / ".ids.parts")
    return str(target)


def _buckets(df: DataFrame, value: str | None = None) -> dict[str, int]:
    return {r["bucket"].strftime("%Y-%m-%dT%H:%M:%SZ"): int(r["n"] or 0)
            for r in per_bucket(df, value).collect()}


def name_ids_across_counts(points: list[Point], counts: dict[str, DataFrame | None],
                           hops: list[dict[str, Any]], folder: RunFolder) -> None:
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
        lossy = [h for h in stretch if h["missing"] > 0]
        if len(lossy) != 1:
            continue
        up, down = counts[points[i].name], counts[points[j].name]
        if up is None or down is None:  # not id tiers after all: nothing to name
            continue
        gone = missing(up, down).cache()
        lost = gone.count()
        if lost != lossy[0]["missing"]:
            # a counter that missed events it did pass on (an agent killed after delivering a
            # batch, before counting it drained) shows as a loss at one hop and as many
            # unexplained arrivals at a later one; the id tiers around both say which is true
            gained = [h for h in stretch if h is not lossy[0] and h["unexpected"] > 0]
            if not gained or lost != lossy[0]["missing"] - sum(h["unexpected"] for h in gained):
                continue  # the counts and the ids disagree: leave the loss counted, not named
            lossy[0]["counter_gap"] = {
                "counted": lossy[0]["missing"], "lost": lost,
                "passed_on_uncounted": {f"{h['from']}->{h['to']}": h["unexpected"]
                                        for h in gained}}
            for h in gained:
                h["unexpected"], h["buckets"]["unexpected"] = 0, {}
            lossy[0]["missing"], lossy[0]["buckets"]["missing"] = lost, _buckets(gone)
        lossy[0]["missing_ids"] = write_ids(
            gone, folder.ids_file("missing", f"{points[i].name}__{points[j].name}"), folder)
        lossy[0]["ids_between"] = [points[i].name, points[j].name]


def retention_split(flow: Flow, window: Window, topic: dict[str, Any],
                    counts: dict[str, DataFrame | None], folder: RunFolder
                    ) -> dict[str, Any] | None:
    """When retention cut a topic's window, which ids missing from it had been consumed.

    Ids the id tier before the topic has and the topic lost, split by the first id tier after
    it: those there were consumed before retention deleted them; the others are the
    candidates for the production group's retention loss (`kafka_recon.result.build` checks
    them against the offsets deleted unread). `topic` is the topic's entry of replays.json.
    """
    from kafka_recon.sources.topic import PartitionRange, retention_cut
    from kafka_recon.window import Window

    ranges = [PartitionRange(**o) for o in topic.get("offsets", [])]
    if not retention_cut(ranges, Window.millis(window.start)):
        return None
    names = [p.name for p in flow.points]
    at = names.index(topic["tier"])
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
    return {"topic": names[at], "from": before, "to": after,
            "missing_from_topic": lost_from_topic.count(),
            "unread": unread.count(), "unread_ids": path}


def run(spark: SparkSession, flow: Flow, window: Window, folder: RunFolder,
        topic_records: dict[str, DataFrame] | None = None) -> dict[str, Any]:
    """Count every point of the flow and compare each hop; returns the aggregates (also written
    to reconcile.json). Reads stage.json and replays.json from the folder, and each topic's
    first-replay records as the replay step handed them over (`topic_records`, by tier name)
    or, when the steps ran apart, from their Parquet folders.

    The plan: each id tier is read once and cached; one job tallies their records (per bucket,
    unidentifiable, late, and a topic's span per partition); one grouping by id (`compare`)
    answers every hop, and one job tallies it (and fills the findings' cache); one job
    summarises the evidence of causes of every hop with findings (`summaries`), after a small
    job per evidence table that broadcasts its ids and one for the upstream's records per
    minute, which a write loss's shape needs; one job writes every id file.
    """
    from dataclasses import replace

    from pyspark.sql import functions as F

    from kafka_recon.config import KafkaTier

    bucket_s = int(flow.bucket.total_seconds())
    topics = {t["tier"]: t for t in folder.read_json(folder.replays, "replay")["topics"]}
    staged = {t["name"]: t for t in folder.read_json(folder.stage, "stage")}
    points = flow.points
    exact = [i for i, p in enumerate(points) if p.exact]
    slot = {i: k for k, i in enumerate(exact)}  # a point's place among the id tiers
    cached: list[DataFrame] = []

    def keep(df: DataFrame) -> DataFrame:
        cached.append(df.cache())
        return df

    try:
        raws: list[DataFrame] = []
        topic_slots: dict[int, KafkaTier] = {}  # the id tiers that are topics
        for i in exact:
            tier = points[i].tier
            if isinstance(tier, KafkaTier):
                from kafka_recon.spark.replay import arrived, counted

                raw = topic_records[tier.name] if topic_records is not None \
                    else spark.read.parquet(topics[tier.name]["replays"][0]["path"])
                # the replay read a margin beyond the window: what counts, and where an
                # unidentifiable record counts, is decided here as in the replay's summary,
                # with the topic's own grace
                closes_at = replace(window, grace=flow.grace_of(tier)).closes_at
                raw = raw.where(counted(window.start, window.end, closes_at)
                                | (~identifiable(raw) & arrived(window.start, closes_at)))
                topic_slots[slot[i]] = tier
                if topic_records is not None:  # already in memory: a filter over the cache
                    raws.append(raw)
                    continue
            else:
                raw = read_sql_tier(spark, tier, window)
            raws.append(keep(raw))
        records = [window_records(r, window.start, window.end, bucket_s) for r in raws]

        # one job: every id tier's records per bucket, unidentifiable and late, and the
        # topic's per partition
        per_record = _tallied(reduce_union([
            record_marks(r, k, window.start, window.end, bucket_s,
                         "kafka_ts" if k in topic_slots else "event_time", k in topic_slots)
            for k, r in enumerate(raws)]))
        spans = {k: per_record.pop(("span", k), {}) for k in topic_slots}
        # one grouping by id answers every hop between two id tiers
        hop_at: dict[int, int] = {}
        hop_specs: list[tuple[int, int, list[int]]] = []
        for i in range(len(points) - 1):
            if i in slot and i + 1 in slot:
                hop_at[i] = len(hop_specs)
                hop_specs.append((slot[i], slot[i + 1], [slot[j] for j in exact if j <= i]))
        collapse = frozenset(k for k, t in topic_slots.items()
                             if flow.record_of(t).envelope == "debezium")
        # the topics whose next processor declares what it drops on purpose
        dropping = frozenset(k for k, t in topic_slots.items()
                             if flow.drops_after(t) is not None)
        compared = keep(compare(records, collapse, dropping)) if records else None
        marked = marks(compared, len(records), hop_specs, dropping) \
            if compared is not None else None
        per_id, findings = tally_keeping_findings(marked) if marked is not None \
            else ({}, None)
        if findings is not None:
            cached.append(findings)

        tiers: list[dict[str, Any]] = []
        files: list[IdFile] = []
        counts: dict[str, DataFrame | None] = {}
        for i, point in enumerate(points):
            info: dict[str, Any] = {"name": point.name, "type": point.tier.type}
            if i not in slot:
                st = staged[point.name]
                info.update(count=st["count"], distinct=None, buckets=st.get("buckets", {}),
                            exact=False, restarts=st.get("restarts", 0))
                counts[point.name] = None
                tiers.append(info)
                continue
            k = slot[i]
            got = per_record.get(("record", k), {})
            info.update(count=sum(got.values()), distinct=sum(per_id.get(("present", k),
                                                                          {}).values()),
                        buckets=got, exact=True)
            bad = per_record.get(("unidentifiable", k), {})
            info["unidentifiable"] = sum(bad.values())
            if info["unidentifiable"]:
                target = folder.ids_file("unidentifiable", point.tier.name)
                unreadable = raws[k].where(~identifiable(raws[k]))
                files.append(IdFile(target, ("partition", "offset", "reason"),
                                    id_rows(unreadable, ["partition", "offset", "reason"],
                                            None, "partition", "offset"))
                             if k in topic_slots else
                             IdFile(target, ("id", "event_time"),
                                    id_rows(unreadable, ["id", "event_time"], "id")))
                info["unidentifiable_file"] = str(target)
                info["unidentifiable_buckets"] = {b: n for b, n in bad.items() if b}
            if k in topic_slots:
                info["partitions"] = spans[k]
                lt = per_record.get(("late", k), {})
                info["late"] = sum(lt.values())
                if info["late"]:
                    target = folder.ids_file("late", point.tier.name)
                    files.append(IdFile(target, ("id",), id_rows(
                        late(records[k], window.end), ["id"], "id")))
                    info["late_file"], info["late_buckets"] = str(target), lt
            assert compared is not None
            counts[point.name] = ids_of(compared, k)
            tiers.append(info)

        ranks: dict[int, DataFrame] = {}

        def ranked(k: int) -> Callable[[], DataFrame]:
            """A topic's records ranked per partition: ranked once, for every hop."""
            def get() -> DataFrame:
                if k not in ranks:
                    ranks[k] = rank_topic(records[k], spans[k])
                    if needs_sort(spans[k]):  # a sort is worth keeping for every hop
                        ranks[k] = keep(ranks[k])
                return ranks[k]
            return get

        hops: list[dict[str, Any]] = []
        runs: dict[tuple[int, str], DataFrame] = {}  # (hop, key): summarised all at once
        for i, (a, b) in enumerate(zip(points, points[1:], strict=False)):
            ta, tb = tiers[i], tiers[i + 1]
            hop: dict[str, Any] = {"from": a.name, "to": b.name, "side": flow.side_of(a.name)}
            found: dict[str, DataFrame] = {}
            if i in hop_at:
                k, stem = hop_at[i], f"{a.name}__{b.name}"
                assert findings is not None
                found = {kind: findings.where((F.col("kind") == kind) & (F.col("at") == k))
                         for kind in ("missing", "unexpected", "duplicate")}
                paths = {kind: folder.ids_file(kind, stem) for kind in found}
                files += [IdFile(paths["missing"], ("id",),
                                 id_rows(found["missing"], ["id"], "id"), one_task=True),
                          IdFile(paths["unexpected"], ("id",),
                                 id_rows(found["unexpected"], ["id"], "id"), one_task=True),
                          IdFile(paths["duplicate"], ("id", "extra"),
                                 id_rows(found["duplicate"].withColumnRenamed("value", "extra"),
                                         ["id", "extra"], "id", "extra"), one_task=True)]
                expected = per_id.get(("present", slot[i]), {})
                if slot[i] in dropping:
                    # what the processor drops on purpose was never expected after it
                    on_purpose = per_id.get(("filtered", k), {})
                    expected = {x: c - on_purpose.get(x, 0) for x, c in expected.items()
                                if c - on_purpose.get(x, 0)}
                    found["filtered"] = findings.where((F.col("kind") == "filtered")
                                                       & (F.col("at") == k))
                    paths["filtered"] = folder.ids_file("filtered", stem)
                    files.append(IdFile(paths["filtered"], ("id",),
                                        id_rows(found["filtered"], ["id"], "id"), one_task=True))
                    hop.update(filtered=sum(on_purpose.values()),
                               filtered_ids=str(paths["filtered"]))
                hop.update(
                    exact=True, expected=sum(expected.values()), observed=tb["distinct"],
                    missing_ids=str(paths["missing"]), unexpected_ids=str(paths["unexpected"]),
                    duplicate_ids=str(paths["duplicate"]),
                    buckets={"missing": per_id.get(("missing", k), {}),
                             "unexpected": per_id.get(("unexpected", k), {}),
                             "duplicate": per_id.get(("duplicate", k), {}),
                             "expected": expected,
                             **({"filtered": on_purpose} if slot[i] in dropping else {}),
                             "observed": per_id.get(("present", slot[i + 1]), {})})
            else:
                # a count-only end: compare record counts per bucket
                keys = sorted(set(ta["buckets"]) | set(tb["buckets"]))
                e = {x: ta["buckets"].get(x, 0) for x in keys}
                o = {x: tb["buckets"].get(x, 0) for x in keys}
                hop.update(exact=False, expected=ta["count"], observed=tb["count"],
                           missing_ids=None, unexpected_ids=None, duplicate_ids=None,
                           buckets={"missing": {x: max(0, e[x] - o[x]) for x in keys},
                                    "unexpected": {x: max(0, o[x] - e[x]) for x in keys},
                                    "duplicate": {}, "expected": e, "observed": o})
            for key in ("missing", "unexpected", "duplicate"):
                hop[key] = sum(hop["buckets"][key].values())
            if i in hop_at:
                runs.update({(i, key): df for key, df in
                             _evidence(hop, a, b, found, ranked(slot[i]), ranked(slot[i + 1]),
                                       records[slot[i]]).items()})
            hops.append(hop)
        for (at, key), summary in summaries(runs).items():
            hops[at][key] = summary
        # every id file of every hop and tier, in one job
        write_id_files(spark, files, folder.path / ".ids.parts")

        name_ids_across_counts(points, counts, hops, folder)
        aggregates: dict[str, Any] = {"tiers": tiers, "hops": hops}
        gone = [split for t in flow.kafka_tiers
                if (split := retention_split(flow, window, topics[t.name], counts, folder))]
        if gone:
            aggregates["retention"] = gone
        folder.write_json(folder.aggregates, aggregates)
        return aggregates
    finally:
        for df in cached:
            df.unpersist()


def _evidence(hop: dict[str, Any], a: Point, b: Point, found: dict[str, DataFrame],
              ranked_a: Callable[[], DataFrame], ranked_b: Callable[[], DataFrame],
              upstream: DataFrame) -> dict[str, DataFrame]:
    """The evidence of a cause, for a hop with findings (kafka_recon.result.causes reads it):
    out of a topic, where the lost and re-delivered records sit in it; into a topic, the lost
    records' shape in the upstream's own order (the upstream's ranks, when it is a topic
    too), and where the copies of a duplicate sit in the topic and under which timestamps.
    `ranked_a` and `ranked_b` give each end's records ranked per partition, when it is a topic
    (ranked once for every hop that needs them). Returns the evidence tables to summarise
    under the hop's keys (`summaries`, every hop's in one job)."""
    from kafka_recon.config import KafkaTier

    runs: dict[str, DataFrame] = {}
    if isinstance(b.tier, KafkaTier):
        if hop["missing"]:
            if isinstance(a.tier, KafkaTier):  # from a topic: where the lost records sat
                runs["missing_runs"] = runs_of(found["missing"], ranked_a())
            else:
                runs["missing_shape"] = upstream_runs(found["missing"], upstream)
        if hop["duplicate"]:
            runs["duplicate_runs"] = runs_of(found["duplicate"], ranked_b())
            runs["duplicate_stamps"] = copies_of(found["duplicate"], ranked_b())
    elif isinstance(a.tier, KafkaTier):
        if hop["missing"]:
            runs["missing_runs"] = runs_of(found["missing"], ranked_a())
        if hop["duplicate"]:
            runs["duplicate_runs"] = runs_of(found["duplicate"], ranked_a())
    return runs


def reduce_union(frames: list[DataFrame]) -> DataFrame:
    from functools import reduce

    return reduce(lambda x, y: x.unionByName(y), frames)


def tally_keeping_findings(marked: DataFrame
                           ) -> tuple[dict[tuple[str, int], dict[str, Any]], DataFrame]:
    """The marks tallied (`_tallied`), and the findings (every mark but `present`), cached by
    that same job: the id files and the evidence read the findings, a few, not every id.

    The tally reads the findings through their cache so that the cache is filled before the
    evidence is planned: Spark sizes a cache not yet filled as the plan it caches (here the
    whole comparison), and would shuffle and sort every record of the topic to join it with
    a few ids, where a filled one is measured and broadcast."""
    from pyspark.sql import functions as F

    findings = marked.where(F.col("kind") != "present").cache()
    try:
        return _tallied(reduce_union([marked.where(F.col("kind") == "present"),
                                      findings])), findings
    except BaseException:
        findings.unpersist()
        raise


def _tallied(marked: DataFrame) -> dict[tuple[str, int], dict[str, Any]]:
    """Marks tallied, a few rows to the driver: {(kind, at): {bucket: n}} (a null bucket as
    ''); for `span` marks {(kind, at): {partition: {records, first_offset, last_offset}}}."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for r in tally(marked).collect():
        into = out.setdefault((r["kind"], int(r["at"])), {})
        if r["kind"] == "span":
            into[str(r["part"])] = {"records": int(r["n"]),
                                    "first_offset": int(r["first_offset"]),
                                    "last_offset": int(r["last_offset"])}
        else:
            bucket = r["bucket"].strftime("%Y-%m-%dT%H:%M:%SZ") if r["bucket"] else ""
            into[bucket] = int(r["n"] or 0)
    return out
