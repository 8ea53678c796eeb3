"""Reading the id tiers for the reconcile step: each tier's records in the window, with their
bucket (pure transforms), and a SQL tier's ids as Spark reads them over JDBC."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from kafka_recon.config import SqlTier, TableTier
from kafka_recon.sources.jdbc import read_ids
from kafka_recon.sources.table import TableRead, read_table
from kafka_recon.spark.records import event_time, normalise_id
from kafka_recon.window import Window

# An SQL tier is read in this many event-time slices, plus one for whatever they do not cover,
# whatever its size, unless the tier names its own `slices`. Each slice is a query of its own:
# on a table without an index on its event time each scans the whole table, so slices beyond
# the cores reading them only add scans. At 1M rows (bench.tune, bench/tune-jdbc.json) 2 slices
# gave the fastest median run, 75.5 s against 76.7 (1), 78.2 (4) and 81.9 (8). At 50M, 2 slices
# of 25M records took the stage reading the SQL tiers 199.4 s against 288.4 for 10 slices of 5M
# (bench/tune-slices-50m.json): slices once grew with the records because a 25M slice ran the
# 1g heap out in the comparison's partial aggregation, gone since 2026-11-28 (157ba74).
JDBC_SLICES = 2
# A tier staging counted at most this many records is read in one slice: a slice is a query
# and a task of its own, and at 10k records the second one only added both
# (docs/performance-history.md, "A small window's seconds").
ONE_SLICE = 100_000


def jdbc_slices(tier: SqlTier, records: int | None = None) -> int:
    """How many event-time slices a SQL tier is read in: its own `slices`, else one for a tier
    staging counted at most ONE_SLICE records, else JDBC_SLICES."""
    if tier.slices:
        return tier.slices
    return 1 if records is not None and records <= ONE_SLICE else JDBC_SLICES


def bucket_of(col: Column, start: datetime, bucket_seconds: int) -> Column:
    """The start of the bucket a time falls in; buckets are aligned on the window start."""
    origin = F.lit(int(start.timestamp()))
    secs = F.unix_timestamp(col)
    return F.timestamp_seconds(origin + F.floor((secs - origin) / bucket_seconds)
                               * bucket_seconds)


def _identified() -> Column:
    return F.col("id").isNotNull() & F.col("event_time").isNotNull()


def identifiable(df: DataFrame) -> Column:
    return _identified()


def made_in(start: datetime, end: datetime) -> Column:
    """A record of the window: identifiable, its event time in [start, end)."""
    return (_identified() & (F.col("event_time") >= F.lit(start))
            & (F.col("event_time") < F.lit(end)))


def window_records(df: DataFrame, start: datetime, end: datetime,
                   bucket_seconds: int) -> DataFrame:
    """The tier's identifiable records whose event time is in [start, end), with their bucket."""
    return (df.where(made_in(start, end))
            .withColumn("bucket", bucket_of(F.col("event_time"), start, bucket_seconds)))


def read_sql_tier(spark: SparkSession, tier: SqlTier, window: Window,
                  records: int | None = None) -> DataFrame:
    """A SQL tier's (id, event_time) records: its id query as the sources layer reads it over
    JDBC (text ids, in parallel time slices: `jdbc_slices`, `records` what staging counted),
    normalised as every tier's are."""
    df = read_ids(spark, tier, window, jdbc_slices(tier, records))
    return df.select(normalise_id(F.col("id")).alias("id"),
                     event_time(F.col("event_time"), "iso8601").alias("event_time"))


def read_table_tier(spark: SparkSession, tier: TableTier, window: Window) -> TableRead:
    """A table tier's (id, event_time) records of the window, normalised as every tier's are,
    the table's state it read (an Iceberg snapshot, a Delta version) and its writers."""
    read = read_table(spark, tier, window)
    return replace(read, records=read.records.select(normalise_id(F.col("id")).alias("id"),
                                                     "event_time"))
