"""How ids and event times are read (kafka_recon.spark.records), and id files that any CSV
reader reads back to the exact ids; on a local Spark."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

pyspark = pytest.importorskip("pyspark")
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.types import BinaryType, StringType, StructField, StructType  # noqa: E402

from kafka_recon.config import RecordSpec  # noqa: E402
from kafka_recon.spark.idfiles import write_ids  # noqa: E402
from kafka_recon.spark.records import event_time, normalise_id  # noqa: E402
from kafka_recon.spark.replay import extract_records  # noqa: E402

T = datetime(2026, 11, 20, 8, 30, 15, 123000)  # naive: Spark gives UTC back naive


def one(spark: SparkSession, column: F.Column, value: str | None) -> object:
    df = spark.createDataFrame([(value,)], StructType([StructField("v", StringType())]))
    return df.select(column.alias("x")).collect()[0]["x"]


@pytest.mark.parametrize(("raw", "id_"), [
    ("9223372036854775806", "9223372036854775806"), ("-9007199254740993", "-9007199254740993"),
    ("1.0", "1"), ("-12.000", "-12"), ("-0", "0"), ("0", "0"), ("007", "007"), ("1.5", "1.5"),
    (" 7", " 7"), ("a1.0", "a1.0"), ("NULL", "NULL"), ("", ""), ("-0.0", "0"), ("1.", "1."),
    (".0", ".0"), ("1.0.0", "1.0.0"), ("١.0", "١.0"), (None, None),
])
def test_ids_are_text_with_integral_decimals_made_integers_and_nothing_else_changed(
        spark: SparkSession, raw: str | None, id_: str | None) -> None:
    assert one(spark, normalise_id(F.col("v")), raw) == id_


@pytest.mark.parametrize(("fmt", "text"), [
    ("iso8601", "2026-11-20T08:30:15.123Z"), ("iso8601", "2026-11-20 08:30:15.123"),
    ("iso8601", "2026-11-20T16:30:15.123+08:00"), ("epoch_s", "1795163415.123"),
    ("epoch_ms", "1795163415123"), ("epoch_us", "1795163415123000"),
    ("epoch_ns", "1795163415123000000"), ("dd/MM/yyyy HH:mm:ss.SSS", "20/11/2026 08:30:15.123"),
])
def test_every_event_time_format_reads_the_same_instant(spark: SparkSession, fmt: str,
                                                        text: str) -> None:
    assert one(spark, event_time(F.col("v"), fmt), text) == T


@pytest.mark.parametrize(("fmt", "text"), [
    ("iso8601", "yesterday"), ("iso8601", "1795163415123"), ("epoch_ms", "2026-11-20"),
    ("epoch_ms", "1e400"), ("dd/MM/yyyy", "2026-11-20"), ("iso8601", None),
])
def test_an_event_time_that_is_not_one_is_null_never_an_error(spark: SparkSession, fmt: str,
                                                              text: str | None) -> None:
    assert one(spark, event_time(F.col("v"), fmt), text) is None


RAW = StructType([StructField("key", BinaryType()), StructField("value", BinaryType()),
                  StructField("partition", StringType()), StructField("offset", StringType()),
                  StructField("timestamp", StringType())])


def _kafka(spark: SparkSession, rows: list[tuple[bytes | None, bytes | None]]) -> object:
    data = [(k, v, "0", str(i), None) for i, (k, v) in enumerate(rows)]
    df = spark.createDataFrame(data, RAW)
    return df.withColumn("partition", F.col("partition").cast("int")) \
        .withColumn("offset", F.col("offset").cast("long")) \
        .withColumn("timestamp", F.lit(datetime(2026, 11, 20, 9, tzinfo=UTC)))


def test_a_malformed_time_is_one_unidentifiable_record_and_every_good_one_counts(
        spark: SparkSession) -> None:
    raw = _kafka(spark, [(b"1", b'{"id": 1, "at": "2026-11-20T08:30:15.123Z"}'),
                         (b"2", b'{"id": 2, "at": "yesterday"}'),
                         (b"3", b'{"id": 9223372036854775806, "at": 1795163415123}')])
    iso = extract_records(raw, RecordSpec(id="$.id", event_time="$.at"))  # type: ignore[arg-type]
    got = [(r["id"], r["event_time"], r["offset"]) for r in iso.collect()]
    assert got == [("1", T, 0), ("2", None, 1), ("9223372036854775806", None, 2)]
    ms = extract_records(raw, RecordSpec(id="$.id", event_time="$.at",  # type: ignore[arg-type]
                                         event_time_format="epoch_ms"))
    assert [r["event_time"] for r in ms.collect()] == [None, None, T]


def test_the_whole_value_or_key_is_the_id_and_bytes_that_are_not_utf8_have_none(
        spark: SparkSession) -> None:
    raw = _kafka(spark, [(b"k-1", "order 7 é".encode()), (b"\xff\xfe", b"\xc3\x28")])
    by_value = extract_records(raw, RecordSpec(id="value",  # type: ignore[arg-type]
                                               event_time="kafka_timestamp"))
    assert [r["id"] for r in by_value.collect()] == ["order 7 é", None]
    by_key = extract_records(raw, RecordSpec(id="key",  # type: ignore[arg-type]
                                             event_time="kafka_timestamp"))
    assert [r["id"] for r in by_key.collect()] == ["k-1", None]


TRICKY = ["a,b", 'say "hi"', " lead", "trail ", "both  ", "back\\", "tab\there",
          "new\nline", "cr\r\nlf", "é中文", "NULL", "null", "", '"', '\\"x', "007", "=1+1"]


def test_id_files_are_rfc_4180_and_read_back_to_the_exact_ids(spark: SparkSession,
                                                               tmp_path: Path) -> None:
    df = spark.createDataFrame([(i,) for i in TRICKY], StructType([StructField("id",
                                                                               StringType())]))
    from kafka_recon.runfolder import RunFolder

    path = Path(write_ids(df, tmp_path / "missing" / "a__b.csv", RunFolder(tmp_path)))
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["id"]
    assert sorted(r[0] for r in rows[1:]) == sorted(TRICKY)
    text = path.read_text(encoding="utf-8")
    assert '"say ""hi"""' in text and "\\\"" not in text.replace('\\""x', "")


def test_debezium_events_without_their_schema_part_read_like_those_with_it(
        spark: SparkSession) -> None:
    # the shapes Debezium's JsonConverter writes with schemas.enable=false
    env = {"source": {"ts_ms": 1795163415123}, "ts_ms": 1795163415999}
    raw = _kafka(spark, [
        (b'{"id": 1}', json.dumps({**env, "op": "c", "before": None,
                                   "after": {"id": 1, "ts": 1795163415123}}).encode()),
        (b'{"id": 1}', json.dumps({**env, "op": "u", "before": None,
                                   "after": {"id": 1, "ts": 1795163415123}}).encode()),
        (b'{"id": 2}', json.dumps({**env, "op": "d", "after": None,
                                   "before": {"id": None, "ts": None}}).encode()),
        (b'{"id": 2}', None)])  # the tombstone
    recs = extract_records(raw, RecordSpec(  # type: ignore[arg-type]
        id="$.id", event_time="$.ts", event_time_format="epoch_ms", envelope="debezium"))
    assert [(r["id"], r["event_time"]) for r in recs.collect()] == [("1", T), ("1", T),
                                                                   ("2", T)]
