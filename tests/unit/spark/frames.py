"""Small frames for the Spark steps' unit tests: explicit schemas, a window, and the helpers
every phase's test reads its answers with."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kafka_recon.spark import compare as cmp
from kafka_recon.spark import read as rd

START = datetime(2026, 11, 20, tzinfo=UTC)
END = START + timedelta(days=1)
HOUR = 3600

TOPIC = StructType([StructField("id", StringType()), StructField("event_time", TimestampType()),
                    StructField("partition", IntegerType()), StructField("offset", LongType()),
                    StructField("kafka_ts", TimestampType())])
KAFKA_ROWS = StructType([StructField("key", BinaryType()), StructField("value", BinaryType()),
                         StructField("partition", IntegerType()),
                         StructField("offset", LongType()),
                         StructField("timestamp", TimestampType())])
TABLE = StructType([StructField("id", StringType()), StructField("event_time", TimestampType())])


def at(minutes: float) -> datetime:
    return START + timedelta(minutes=minutes)


def table(spark: SparkSession, rows: list[tuple[str | None, datetime | None]]) -> DataFrame:
    return spark.createDataFrame(rows, TABLE)


def counts(spark: SparkSession, rows: list[tuple[str | None, datetime | None]]) -> DataFrame:
    """(id, n, bucket) of one id tier, as the reconcile step derives it from the comparison."""
    return cmp.ids_of(cmp.compare([rd.window_records(table(spark, rows), START, END, HOUR)]), 0)


def compared(spark: SparkSession, *tiers: list[tuple[str | None, datetime | None]]
             ) -> DataFrame:
    return cmp.compare([rd.window_records(table(spark, t), START, END, HOUR) for t in tiers])


def marked(df: DataFrame, kind: str, at: int, *cols: str) -> list[tuple]:
    return ids(df.where((df.kind == kind) & (df.at == at)), *cols)


def ids(df: DataFrame, *cols: str) -> list[tuple]:
    return sorted(tuple(r[c] for c in (cols or ("id",))) for r in df.collect())
