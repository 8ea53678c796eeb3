"""Tallies: marks summed per kind, place and bucket, a few rows to the driver.

Each id tier's records are marked (`record_marks`: a record of the window, unidentifiable, late,
a topic's span per partition) and the marks tallied in one job; the comparison's marks are
tallied the same way (`tally_keeping_findings`)."""

from __future__ import annotations

from datetime import datetime
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kafka_recon.spark.conf import shuffle_partitions
from kafka_recon.spark.read import bucket_of, identifiable, made_in
from kafka_recon.spark.session import cores, names, release
from kafka_recon.window import from_micros, iso_z, micros


def record_marks(raw: DataFrame, at: int, start: datetime, end: datetime, bucket_seconds: int,
                 time_col: str, is_topic: bool) -> DataFrame:
    """(kind, at, bucket, part, offset, when, arrived, value) per record of one id tier:
    `record` for each window record (its event's bucket, its event time as `when` and, in a
    topic, its Kafka timestamp as `arrived`: their latest per bucket is how fresh the tier is);
    `unidentifiable` for each record whose id or event time cannot be read (bucketed by the
    time that is known, null when none is); for the topic, `late` for each window record that
    reached it after the window closed, and `span` for each window record under its partition
    (`part`, with its offset)."""
    ok = identifiable(raw)
    inside = made_in(start, end)
    bucket = bucket_of(F.col("event_time"), start, bucket_seconds)
    none = F.lit(None)

    def mark(cond: Column, kind: str, when: Column, part: Column = none,
             at_time: Column = none, arrived: Column = none) -> Column:
        return F.when(cond, F.struct(F.lit(kind).alias("kind"),
                                     when.cast("timestamp").alias("bucket"),
                                     part.cast("int").alias("part"),
                                     (F.col("offset") if is_topic else none).cast("long")
                                     .alias("offset"),
                                     at_time.cast("timestamp").alias("when"),
                                     arrived.cast("timestamp").alias("arrived")))

    cols = [mark(inside, "record", bucket, at_time=F.col("event_time"),
                 arrived=F.col("kafka_ts") if is_topic else none),
            mark(~ok, "unidentifiable", bucket_of(F.col(time_col), start, bucket_seconds))]
    if is_topic:
        cols += [mark(inside & (F.col("kafka_ts") >= F.lit(end)), "late", bucket),
                 mark(inside, "span", none, F.col("partition"))]
    return (raw.select(F.explode(F.array(*cols)).alias("m")).where(F.col("m").isNotNull())
            .select("m.kind", F.lit(at).alias("at"), "m.bucket", "m.part", "m.offset",
                    "m.when", "m.arrived", F.lit(1).cast("long").alias("value")))


def tally(df: DataFrame, records: bool = False) -> DataFrame:
    """(kind, at, bucket[, part], n[, first_offset, last_offset, newest, newest_arrival]):
    marks summed per kind, place and bucket (and, for `records`, `record_marks`' marks, per
    partition, with their offsets and latest times): a few rows. Which marks they are is
    said, not asked of the frame: asking is a round trip to a Spark Connect server."""
    keys = ["kind", "at", "bucket", *(["part"] if records else [])]
    aggs = [F.sum("value").alias("n")]
    if records:
        aggs += [F.min("offset").alias("first_offset"), F.max("offset").alias("last_offset"),
                 F.max("when").alias("newest"), F.max("arrived").alias("newest_arrival")]
    return df.groupBy(*names(*keys)).agg(*aggs)


def per_bucket(df: DataFrame, value: str | None = None) -> DataFrame:

    agg = F.sum(value) if value else F.count(F.lit(1))
    return df.groupBy(*names("bucket")).agg(agg.alias("n"))


def reduce_union(frames: list[DataFrame]) -> DataFrame:
    return reduce(lambda x, y: x.unionByName(y), frames)


def tally_keeping_findings(marked: DataFrame
                           ) -> tuple[dict[tuple[str, int], dict[str, Any]], DataFrame]:
    """The marks tallied (`tallied`), and the findings (every mark but `present`), cached by
    that same job: the id files and the evidence read the findings, a few, not every id.

    The tally reads the findings through their cache so that the cache is filled before the
    evidence is planned: Spark sizes a cache not yet filled as the plan it caches (here the
    whole comparison), and would shuffle and sort every record of the topic to join it with
    a few ids, where a filled one is measured and broadcast."""
    findings = marked.where(F.col("kind") != "present").cache()
    try:
        return tallied(reduce_union([marked.where(F.col("kind") == "present"),
                                      findings])), findings
    except BaseException:
        release([findings])
        raise


def to_read(findings: DataFrame, per_id: dict[tuple[str, int], dict[str, Any]]
            ) -> DataFrame:
    """The cached findings, read in as many partitions as they need (`per_id`, their tally,
    says how many they are; a mark's value counts it once or more, so never too few).

    They are cached in the comparison's partitions, sized for every id of the window (80 at
    10M), and hold a few of them: read as they are cached, every job of the evidence and the
    id files would run 80 near-empty tasks per stage."""
    found = sum(n for (kind, _), by in per_id.items() if kind != "present"
                for n in by.values())
    return findings.coalesce(shuffle_partitions(found, cores(findings.sparkSession)))


def tallied(marked: DataFrame, records: bool = False
            ) -> dict[tuple[str, int], dict[str, Any]]:
    """Marks tallied, a few rows to the driver: {(kind, at): {bucket: n}} (a null bucket as
    ''). With `records` (`record_marks`' marks): for `span` marks {(kind, at): {partition:
    {records, first_offset, last_offset}}}, and for `record` marks also {("newest", at):
    {bucket: epoch micros}} and ("newest_arrival", at), the latest event time and Kafka
    timestamp of each bucket."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    rows = tally(marked, records).withColumn("bucket", micros("bucket"))
    if records:  # times cross to the driver as epoch micros, whatever the host's zone
        rows = rows.withColumns({"newest": micros("newest"),
                                 "newest_arrival": micros("newest_arrival")})
    for r in rows.collect():
        into = out.setdefault((r["kind"], int(r["at"])), {})
        if r["kind"] == "span":
            into[str(r["part"])] = {"records": int(r["n"]),
                                    "first_offset": int(r["first_offset"]),
                                    "last_offset": int(r["last_offset"])}
        else:
            bucket = iso_z(from_micros(r["bucket"])) if r["bucket"] is not None else ""
            into[bucket] = int(r["n"] or 0)
            for key in ("newest", "newest_arrival") if records and r["kind"] == "record" \
                    else ():
                if r[key] is not None:
                    out.setdefault((key, int(r["at"])), {})[bucket] = int(r[key])
    return out


def bucket_counts(df: DataFrame, value: str | None = None) -> dict[str, int]:
    return {iso_z(from_micros(r["bucket"])): int(r["n"] or 0)
            for r in per_bucket(df, value).withColumn("bucket", micros("bucket")).collect()}
