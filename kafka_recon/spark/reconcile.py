"""Step 3, reconcile: ids per tier and bucket to per-hop missing, unexpected and duplicate records.

The `spark-submit` entry point is `spark_jobs/reconcile.py`; this module is the step itself.

Between two id tiers the comparison is exact (anti-joins over distinct ids); every missing,
unexpected and duplicated id is written in full to a CSV file by the executors, never collected.
Only per-bucket counts reach the driver; `kafka_recon.result.build` turns them into the result.
"""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from kafka_recon.config import Flow, Point
    from kafka_recon.runfolder import RunFolder
    from kafka_recon.window import Window

JDBC_SLICES = 4


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


def id_counts(records: DataFrame) -> DataFrame:
    """(id, n, bucket): how many times each id is present, in the bucket of its first event."""
    from pyspark.sql import functions as F

    return records.groupBy("id").agg(F.count(F.lit(1)).alias("n"),
                                     F.min("bucket").alias("bucket"))


def missing(up: DataFrame, down: DataFrame) -> DataFrame:
    """Ids the upstream tier has and the downstream tier lacks (a left anti-join)."""
    return up.select("id", "bucket").join(down.select("id"), "id", "left_anti")


def unexpected(down: DataFrame, upstream_ids: DataFrame) -> DataFrame:
    """Ids downstream that no upstream tier has: someone else wrote them."""
    return down.select("id", "bucket").join(upstream_ids.select("id"), "id", "left_anti")


def duplicated(up: DataFrame, down: DataFrame) -> DataFrame:
    """(id, bucket, extra): copies downstream beyond what upstream already had.

    A duplicate belongs to the tier where it first appears: an id twice in the topic and twice in
    the sink is the topic's duplicate, not the sink's.
    """
    from pyspark.sql import functions as F

    joined = down.alias("d").join(up.select("id", F.col("n").alias("up_n")), "id", "left")
    base = F.greatest(F.coalesce(F.col("up_n"), F.lit(1)), F.lit(1))
    return (joined.where(F.col("n") > base)
            .select("id", "bucket", (F.col("n") - base).alias("extra")))


def late(topic: DataFrame, end: datetime) -> DataFrame:
    """Window records that reached the topic after the window closed, inside grace."""
    from pyspark.sql import functions as F

    return topic.where(F.col("kafka_ts") >= F.lit(end)).select("id", "bucket")


def unidentifiable(df: DataFrame, start: datetime, bucket_seconds: int,
                   time_col: str) -> DataFrame:
    """Records whose id or event time cannot be read, bucketed by the time that is known."""
    from pyspark.sql import functions as F

    return df.where(~identifiable(df)).withColumn(
        "bucket", bucket_of(F.col(time_col), start, bucket_seconds))


def per_bucket(df: DataFrame, value: str | None = None) -> DataFrame:
    from pyspark.sql import functions as F

    agg = F.sum(value) if value else F.count(F.lit(1))
    return df.groupBy("bucket").agg(agg.alias("n"))


def runs_of(marked: DataFrame, topic_records: DataFrame) -> DataFrame:
    """Where in the topic the marked ids sit, as runs: (partition, first_offset, last_offset,
    records, first_ts, last_ts), a run being consecutive window records of one partition.

    Records are ranked by offset among the window's records of their partition, so offsets
    skipped by transaction markers or compaction do not split a run; an id at several offsets
    (a topic duplicate) marks each.
    """
    from pyspark.sql import Window as W
    from pyspark.sql import functions as F

    ranked = topic_records.select("id", "partition", "offset", "kafka_ts").withColumn(
        "rank", F.row_number().over(W.partitionBy("partition").orderBy("offset")))
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
    # one global order: the upstream's records of one window (ids only), not the topic's
    ranked = firsts.withColumn("rank", F.row_number().over(W.orderBy("event_time", "id")))
    hit = ranked.join(marked.select("id").distinct(), "id", "left_semi")
    island = F.col("rank") - F.row_number().over(W.orderBy("rank"))
    return (hit.withColumn("island", island).groupBy("island")
            .agg(F.min_by("id", "rank").alias("first_id"), F.max_by("id", "rank").alias("last_id"),
                 F.count(F.lit(1)).alias("records"), F.min("event_time").alias("first_time"),
                 F.max("event_time").alias("last_time"))
            .drop("island"))


def upstream_summary(runs: DataFrame) -> dict[str, Any]:
    """The runs' totals, how many are single records, their time span, and the largest."""
    from pyspark.sql import functions as F

    t = runs.agg(F.count(F.lit(1)).alias("runs"), F.sum("records").alias("records"),
                 F.sum(F.when(F.col("records") == 1, 1).otherwise(0)).alias("singles"),
                 F.min("first_time").alias("first_time"),
                 F.max("last_time").alias("last_time")).collect()[0]
    largest = runs.orderBy(F.desc("records"), "first_time").limit(MAX_RUNS)
    return {"runs": int(t["runs"]), "records": int(t["records"] or 0),
            "singles": int(t["singles"] or 0), "first_time": _iso(t["first_time"]),
            "last_time": _iso(t["last_time"]),
            "largest": [{"first_id": str(r["first_id"]), "last_id": str(r["last_id"]),
                         "records": int(r["records"]), "first_time": _iso(r["first_time"]),
                         "last_time": _iso(r["last_time"])} for r in largest.collect()]}


def copy_stamps(dup: DataFrame, topic_records: DataFrame) -> dict[str, int]:
    """For ids the topic holds more than once: how many have every copy under one Kafka
    timestamp (the producer sent the very same record again: a client retry keeps the
    original's CreateTime), and how many copies carry their event time as their timestamp
    (a producer that stamps records itself: then equal timestamps prove nothing)."""
    from pyspark.sql import functions as F

    per_id = (topic_records.join(dup.select("id").distinct(), "id", "left_semi")
              .groupBy("id").agg(F.count_distinct("kafka_ts").alias("stamps"),
                                 F.max((F.col("kafka_ts") == F.col("event_time")).cast("int"))
                                 .alias("stamped")))
    row = per_id.agg(F.count(F.lit(1)).alias("ids"),
                     F.sum(F.when(F.col("stamps") == 1, 1).otherwise(0)).alias("same"),
                     F.sum("stamped").alias("stamped")).collect()[0]
    return {"ids": int(row["ids"]), "same_timestamp": int(row["same"] or 0),
            "stamped_with_event_time": int(row["stamped"] or 0)}


MAX_RUNS = 50  # the largest runs reach the driver: evidence, never the record-level answer


def run_summary(runs: DataFrame) -> dict[str, Any]:
    """The runs' totals and the largest of them (at most MAX_RUNS rows to the driver)."""
    from pyspark.sql import functions as F

    totals = runs.agg(F.count(F.lit(1)).alias("runs"), F.sum("records").alias("records"),
                      F.count_distinct("partition").alias("partitions")).collect()[0]
    largest = runs.orderBy(F.desc("records"), "partition", "first_offset").limit(MAX_RUNS)
    return {"runs": int(totals["runs"]), "records": int(totals["records"] or 0),
            "partitions": int(totals["partitions"]),
            "largest": [{"partition": int(r["partition"]), "first_offset": int(r["first_offset"]),
                         "last_offset": int(r["last_offset"]), "records": int(r["records"]),
                         "first_ts": _iso(r["first_ts"]), "last_ts": _iso(r["last_ts"])}
                        for r in largest.collect()]}


def _iso(t: datetime | None) -> str | None:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ") if t is not None else None


def partition_spans(topic_records: DataFrame) -> dict[str, dict[str, int]]:
    """Per partition, the window's records and their first and last offsets."""
    from pyspark.sql import functions as F

    rows = topic_records.groupBy("partition").agg(
        F.count(F.lit(1)).alias("records"), F.min("offset").alias("first_offset"),
        F.max("offset").alias("last_offset")).collect()
    return {str(r["partition"]): {"records": int(r["records"]),
                                  "first_offset": int(r["first_offset"]),
                                  "last_offset": int(r["last_offset"])} for r in rows}


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


def write_ids(df: DataFrame, target: Path, columns: list[str]) -> str:
    """Every row, sorted, one RFC 4180 CSV with a header, written by an executor (never the
    driver): UTF-8, quotes doubled (Spark's default escapes them with a backslash), nothing
    trimmed (Spark's default trims), fields with a comma, quote or line break quoted."""
    tmp = target.with_name(target.name + ".parts")
    shutil.rmtree(tmp, ignore_errors=True)
    df.select(*columns).orderBy(*columns).coalesce(1).write.mode("overwrite") \
        .option("header", True).option("encoding", "UTF-8").option("quote", '"') \
        .option("escape", '"').option("ignoreLeadingWhiteSpace", False) \
        .option("ignoreTrailingWhiteSpace", False).option("lineSep", "\n").csv(str(tmp))
    parts = sorted(tmp.glob("part-*.csv"))
    target.parent.mkdir(parents=True, exist_ok=True)
    if parts and parts[0].stat().st_size > 0:
        parts[0].replace(target)
    else:  # an empty result: Spark may write no file at all
        target.write_text(",".join(columns) + "\n")
    shutil.rmtree(tmp, ignore_errors=True)
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
            gone, folder.ids_file("missing", f"{points[i].name}__{points[j].name}"), ["id"])
        lossy[0]["ids_between"] = [points[i].name, points[j].name]


def retention_split(flow: Flow, window: Window, replays: dict[str, Any],
                    counts: dict[str, DataFrame | None], folder: RunFolder
                    ) -> dict[str, Any] | None:
    """When retention cut the window, which ids missing from the topic had been consumed.

    Ids the upstream has and the topic lost, split by the first id tier after the topic: those
    there were consumed before retention deleted them; the others are the candidates for the
    production group's retention loss (`kafka_recon.result.build` checks them against the offsets
    deleted unread).
    """
    from kafka_recon.sources.topic import PartitionRange, retention_cut
    from kafka_recon.window import Window

    ranges = [PartitionRange(**o) for o in replays.get("offsets", [])]
    if not retention_cut(ranges, Window.millis(window.start)):
        return None
    names = [p.name for p in flow.points]
    at = names.index(flow.topic_tier.name)
    before = next((n for n in reversed(names[:at]) if counts[n] is not None), None)
    after = next((n for n in names[at + 1:] if counts[n] is not None), None)
    topic = counts[names[at]]
    up = counts[before] if before else None
    down = counts[after] if after else None
    if up is None or down is None or topic is None:
        return None
    lost_from_topic = missing(up, topic).cache()
    unread = lost_from_topic.join(down.select("id"), "id", "left_anti").cache()
    path = write_ids(unread, folder.ids_file("missing", f"retention__{names[at]}__{after}"),
                     ["id"])
    return {"from": before, "to": after, "missing_from_topic": lost_from_topic.count(),
            "unread": unread.count(), "unread_ids": path}


def run(spark: SparkSession, flow: Flow, window: Window, folder: RunFolder) -> dict[str, Any]:
    """Count every point of the flow and compare each hop; returns the aggregates (also written
    to reconcile.json). Reads stage.json and replays.json from the folder."""
    from pyspark.sql import functions as F

    from kafka_recon.config import KafkaTier

    bucket_s = int(flow.bucket.total_seconds())
    replays = folder.read_json(folder.replays, "replay")
    staged = {t["name"]: t for t in folder.read_json(folder.stage, "stage")}

    tiers: list[dict[str, Any]] = []
    counts: dict[str, DataFrame | None] = {}
    topic_records: DataFrame | None = None  # the topic's window records: where ids sit
    records: dict[str, DataFrame] = {}      # each id tier's window records (write-side shape)
    points = flow.points
    for point in points:
        tier = point.tier
        info: dict[str, Any] = {"name": point.name, "type": tier.type}
        if point.exact:
            if isinstance(tier, KafkaTier):
                raw = spark.read.parquet(replays["replays"][0]["path"])
                time_col = "kafka_ts"
            else:
                raw = read_sql_tier(spark, tier, window)
                time_col = "event_time"
            if isinstance(tier, KafkaTier):
                # the replay read a margin beyond the window: what counts, and where an
                # unidentifiable record counts, is decided here as in the replay's summary
                from kafka_recon.spark.replay import arrived, counted

                raw = raw.where(counted(window.start, window.end, window.closes_at)
                                | (~identifiable(raw) & arrived(window.start,
                                                                window.closes_at)))
            raw = raw.cache()
            recs = window_records(raw, window.start, window.end, bucket_s).cache()
            records[point.name] = recs
            ids = id_counts(recs)
            if isinstance(tier, KafkaTier) and flow.record.envelope == "debezium":
                # a change stream: several changes of one id are one id present, not copies
                ids = ids.withColumn("n", F.lit(1))
            ids = ids.cache()
            bad = unidentifiable(raw, window.start, bucket_s, time_col)
            row = recs.agg(F.count(F.lit(1)).alias("count"),
                           F.count_distinct("id").alias("distinct")).collect()[0]
            info.update(count=int(row["count"]), distinct=int(row["distinct"]),
                        buckets=_buckets(recs), exact=True)
            n_bad = bad.count()
            info["unidentifiable"] = n_bad
            if n_bad:
                cols = ["partition", "offset", "reason"] if time_col == "kafka_ts" \
                    else ["id", "event_time"]
                info["unidentifiable_file"] = write_ids(
                    bad.fillna("", subset=["id"]) if time_col != "kafka_ts" else bad,
                    folder.ids_file("unidentifiable", tier.name), cols)
                info["unidentifiable_buckets"] = _buckets(bad.where(F.col("bucket").isNotNull()))
            if isinstance(tier, KafkaTier):
                topic_records = recs
                info["partitions"] = partition_spans(recs)
                lt = late(recs, window.end)
                info["late"] = lt.count()
                if info["late"]:
                    info["late_file"] = write_ids(lt, folder.ids_file("late", tier.name),
                                                  ["id"])
                    info["late_buckets"] = _buckets(lt)
            counts[point.name] = ids
        else:
            st = staged[point.name]
            info.update(count=st["count"], distinct=None, buckets=st.get("buckets", {}),
                        exact=False, restarts=st.get("restarts", 0))
            counts[point.name] = None
        tiers.append(info)

    hops: list[dict[str, Any]] = []
    upstream_ids: DataFrame | None = None  # ids of every exact point up to the hop's start
    for i, (a, b) in enumerate(zip(points, points[1:], strict=False)):
        up, down = counts[a.name], counts[b.name]
        ta, tb = tiers[i], tiers[i + 1]
        hop: dict[str, Any] = {"from": a.name, "to": b.name, "side": flow.side_of(a.name)}
        if up is not None:
            upstream_ids = up.select("id") if upstream_ids is None \
                else upstream_ids.unionByName(up.select("id"))
        if up is not None and down is not None and upstream_ids is not None:
            stem = f"{a.name}__{b.name}"
            # each feeds an id file and the per-bucket counts: computed once, not twice
            miss = missing(up, down).cache()
            unexp = unexpected(down, upstream_ids.distinct()).cache()
            dup = duplicated(up, down).cache()
            hop.update(
                exact=True, expected=ta["distinct"], observed=tb["distinct"],
                missing_ids=write_ids(miss, folder.ids_file("missing", stem), ["id"]),
                unexpected_ids=write_ids(unexp, folder.ids_file("unexpected", stem), ["id"]),
                duplicate_ids=write_ids(dup, folder.ids_file("duplicate", stem),
                                        ["id", "extra"]),
                buckets={"missing": _buckets(miss), "unexpected": _buckets(unexp),
                         "duplicate": _buckets(dup, "extra"),
                         "expected": _buckets(up), "observed": _buckets(down)},
            )
        else:
            # a count-only end: compare record counts per bucket
            keys = sorted(set(ta["buckets"]) | set(tb["buckets"]))
            e = {k: ta["buckets"].get(k, 0) for k in keys}
            o = {k: tb["buckets"].get(k, 0) for k in keys}
            hop.update(exact=False, expected=ta["count"], observed=tb["count"],
                       missing_ids=None, unexpected_ids=None, duplicate_ids=None,
                       buckets={"missing": {k: max(0, e[k] - o[k]) for k in keys},
                                "unexpected": {k: max(0, o[k] - e[k]) for k in keys},
                                "duplicate": {}, "expected": e, "observed": o})
        for key in ("missing", "unexpected", "duplicate"):
            hop[key] = sum(hop["buckets"][key].values())
        if hop.get("exact") and topic_records is not None \
                and isinstance(a.tier, KafkaTier):
            # the evidence of a consume-side cause: where the lost and re-delivered records
            # sit in the topic (kafka_recon.result.causes reads it)
            if hop["missing"]:
                hop["missing_runs"] = run_summary(runs_of(miss, topic_records))
            if hop["duplicate"]:
                hop["duplicate_runs"] = run_summary(runs_of(dup, topic_records))
        elif hop.get("exact") and topic_records is not None \
                and isinstance(b.tier, KafkaTier):
            # the write side's: the lost records' shape in the upstream's own order, and
            # where the copies of a duplicate sit in the topic
            if hop["missing"]:
                hop["missing_shape"] = upstream_summary(upstream_runs(miss, records[a.name]))
            if hop["duplicate"]:
                hop["duplicate_runs"] = run_summary(runs_of(dup, topic_records))
                hop["duplicate_stamps"] = copy_stamps(dup, topic_records)
        hops.append(hop)

    name_ids_across_counts(points, counts, hops, folder)
    aggregates: dict[str, Any] = {"tiers": tiers, "hops": hops}
    gone = retention_split(flow, window, replays, counts, folder)
    if gone:
        aggregates["retention"] = gone
    folder.write_json(folder.aggregates, aggregates)
    return aggregates
