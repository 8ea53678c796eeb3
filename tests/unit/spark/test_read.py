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


def test_a_sql_tier_is_read_in_the_measured_slices_at_any_size_unless_it_names_its_own() -> None:
    from kafka_recon.config import SqlTier

    query = "SELECT id, t AS event_time FROM o WHERE t >= :start AND t < :end"
    tier = SqlTier(name="db", type="sql", conn="sqlite:///x.db", ids=query)
    assert rd.jdbc_slices(tier) == rd.JDBC_SLICES == 2
    assert rd.jdbc_slices(tier.model_copy(update={"slices": 16})) == 16
    # a tier staging counted small is one slice (and the one for what slices do not cover)
    assert rd.jdbc_slices(tier, 10_000) == 1
    assert rd.jdbc_slices(tier, 1_000_000) == 2
    assert rd.jdbc_slices(tier.model_copy(update={"slices": 16}), 10_000) == 16
