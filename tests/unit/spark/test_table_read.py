"""A `table` tier read by Spark: Parquet files here (Iceberg and Delta need their jars: the
integration tier reads those); ids exact as text, the window a predicate on the event time,
and every table that cannot be read a one-line error naming the tier, the table and why."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

pyspark = pytest.importorskip("pyspark")
from pyspark.sql import SparkSession  # noqa: E402

from kafka_recon.config import TableTier  # noqa: E402
from kafka_recon.errors import TableTierError  # noqa: E402
from kafka_recon.spark.read import read_table_tier  # noqa: E402
from kafka_recon.window import Window  # noqa: E402

START = datetime(2026, 11, 20, tzinfo=UTC)
WINDOW = Window(START, START + timedelta(days=1), timedelta(minutes=10))


def _tier(path: Path, **kw: object) -> TableTier:
    return TableTier.model_validate({"name": "lake", "type": "table", "format": "parquet",
                                     "table": str(path), **kw})


def _write(spark: SparkSession, path: Path, rows: list[tuple[object, ...]], schema: str) -> Path:
    spark.createDataFrame(rows, schema).write.parquet(str(path))
    return path


def test_parquet_ids_are_exact_text_and_only_the_windows_records_are_read(
        spark: SparkSession, tmp_path: Path) -> None:
    big = 2**62 + 1
    path = _write(spark, tmp_path / "t", [
        (big, START), (7, START + timedelta(hours=23, minutes=59)),
        (8, START + timedelta(days=1)), (9, START - timedelta(seconds=1))],
        "order_id long, created_at timestamp")
    read = read_table_tier(spark, _tier(path, id="order_id", event_time="created_at"), WINDOW)
    assert sorted(r["id"] for r in read.records.collect()) == [str(big), "7"]
    assert read.as_of is None and read.writers is None


def test_decimal_ids_and_text_times_read_as_every_tier_reads_them(
        spark: SparkSession, tmp_path: Path) -> None:
    path = _write(spark, tmp_path / "t", [
        (Decimal("1.00"), "2026-11-20T08:00:00Z"), (Decimal("2.50"), "2026-11-20 09:00:00"),
        (Decimal("3.00"), "not a time")], "id decimal(25,2), event_time string")
    got = {r["id"]: r["event_time"] for r in
           read_table_tier(spark, _tier(path), WINDOW).records.collect()}
    assert got == {"1": datetime(2026, 11, 20, 8), "2.50": datetime(2026, 11, 20, 9)}


@pytest.mark.parametrize(("rows", "schema", "kw", "says"), [
    (None, None, {}, "lake' (parquet table {path}): [PATH_NOT_FOUND]"),
    ([(1, START)], "id long, ts timestamp", {},
     "no event_time column 'event_time' (it has id, ts)"),
    ([(1, 5)], "id long, event_time int", {}, "event_time column 'event_time' is int, not a time"),
    ([(1.5, START)], "id double, event_time timestamp", {},
     "id column 'id' is double: its text would not be the id"),
])
def test_a_table_that_cannot_be_read_is_one_line_naming_tier_table_and_why(
        spark: SparkSession, tmp_path: Path, rows: list[tuple[object, ...]] | None,
        schema: str | None, kw: dict[str, str], says: str) -> None:
    path = tmp_path / "t"
    if rows is not None:
        _write(spark, path, rows, str(schema))
    with pytest.raises(TableTierError) as err:
        read_table_tier(spark, _tier(path, **kw), WINDOW)
    assert says.format(path=path) in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith("tier 'lake' (parquet table ")


@pytest.mark.parametrize(("fields", "says"), [
    ({"format": "iceberg", "table": "db.orders"}, "<catalog>.<namespace>.<table>"),
    ({"format": "parquet", "as_of": 3}, "Parquet files have no versions"),
    ({"format": "delta", "catalog": {"type": "hadoop"}}, "only an iceberg table has a catalog"),
])
def test_a_table_tier_the_config_cannot_mean_is_refused(fields: dict[str, object],
                                                       says: str) -> None:
    with pytest.raises(ValueError, match=says):
        TableTier.model_validate({"name": "lake", "type": "table", "table": "/x", **fields})


def test_an_iceberg_catalog_and_a_delta_table_say_what_spark_needs() -> None:
    ice = TableTier.model_validate({"name": "t", "type": "table", "format": "iceberg",
                                    "table": "lake.db.orders",
                                    "catalog": {"type": "hadoop", "warehouse": "/wh"}})
    assert ice.spark_settings() == {
        "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.lake.type": "hadoop", "spark.sql.catalog.lake.warehouse": "/wh"}
    delta = TableTier.model_validate({"name": "t", "type": "table", "format": "delta",
                                      "table": "/d"})
    assert delta.spark_settings()["spark.sql.extensions"] == \
        "io.delta.sql.DeltaSparkSessionExtension"
