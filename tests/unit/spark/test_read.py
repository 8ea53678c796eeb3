"""Each id tier's window records and their buckets."""

from __future__ import annotations

from datetime import timedelta

import pytest

pytestmark = pytest.mark.unit

pyspark = pytest.importorskip("pyspark")
from pyspark.sql import SparkSession  # noqa: E402

from kafka_recon.spark import read as rd  # noqa: E402
from tests.unit.spark.frames import END, HOUR, START, at, ids, table  # noqa: E402


def test_bucket_edges_belong_to_the_later_bucket(spark: SparkSession) -> None:
    df = rd.window_records(table(spark, [("a", at(59.99)), ("b", at(60)), ("c", at(119.99))]),
                          START, END, HOUR)
    got = {r["id"]: r["bucket"] for r in df.collect()}
    assert got["a"] == START.replace(tzinfo=None)
    assert got["b"] == got["c"] == (START + timedelta(hours=1)).replace(tzinfo=None)


def test_window_is_half_open(spark: SparkSession) -> None:
    df = rd.window_records(table(spark, [("first", START), ("last", END - timedelta(seconds=1)),
                                        ("end", END), ("before", START - timedelta(seconds=1))]),
                          START, END, HOUR)
    assert ids(df) == [("first",), ("last",)]


def test_a_larger_sql_tier_is_read_in_more_slices_none_past_the_measured_size() -> None:
    per = rd.RECORDS_PER_SLICE
    assert rd.jdbc_slices(None) == rd.jdbc_slices(0) == rd.JDBC_SLICES
    assert rd.jdbc_slices(2 * per) == rd.JDBC_SLICES  # the 10M window as measured: unchanged
    assert rd.jdbc_slices(2 * per + 1) == 3
    assert rd.jdbc_slices(10 * per) == 10  # 50M: ten slices of 5M, not two of 25M
    assert rd.jdbc_slices(10**12) == rd.MAX_SLICES
