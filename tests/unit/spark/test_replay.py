"""The replay's transforms: records out of Kafka rows, their summary and digests."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

pytestmark = pytest.mark.unit

pyspark = pytest.importorskip("pyspark")
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql.types import (  # noqa: E402
    LongType,
    StructField,
    StructType,
)

from kafka_recon.config import Drops, RecordSpec  # noqa: E402
from kafka_recon.errors import ConfigError  # noqa: E402
from kafka_recon.spark import replay as rp  # noqa: E402
from tests.unit.spark.frames import END, KAFKA_ROWS, START, TOPIC, at  # noqa: E402


def test_declared_drops_are_judged_per_record_and_an_unjudgeable_one_is_kept(
        spark: SparkSession) -> None:
    raw = spark.createDataFrame([
        (b"test-1", b'{"id": 1, "t": "2026-11-20T05:00:00Z", "amount": "0"}', 0, 1, at(1)),
        (b"k2", b'{"id": 2, "t": "2026-11-20T05:00:00Z", "amount": "12.5"}', 0, 2, at(2)),
        (b"k3", b'{"id": 3, "t": "2026-11-20T05:00:00Z", "amount": "n/a"}', 0, 3, at(3)),
        (b"k4", b'{"id": 4, "t": "2026-11-20T05:00:00Z"}', 0, 4, at(4)),
        (b"k5", b"<not json>", 0, 5, at(5)),
    ], KAFKA_ROWS)
    drops = Drops(where="try_cast(amount AS DOUBLE) <= 0 OR k LIKE 'test-%'",
                  fields={"amount": "$.amount", "k": "key"})
    for spec in (RecordSpec(id="$.id", event_time="$.t"),  # top-level: parsed once
                 RecordSpec(id="$.id", event_time="kafka_timestamp")):
        got = rp.extract_records(raw, spec, drops=drops).collect()
        assert [r["dropped"] for r in got] == [True, False, False, False, False]
        assert [r["id"] for r in got] == ["1", "2", "3", "4", None]


@pytest.mark.parametrize(("where", "names"), [("amount <=", "syntax"),
                                              ("amuont > 0", "amuont")])
def test_a_drop_expression_spark_cannot_read_is_one_config_error_line(
        spark: SparkSession, where: str, names: str) -> None:
    raw = spark.createDataFrame([(b"k", b'{"id": 1}', 0, 1, at(1))], KAFKA_ROWS)
    with pytest.raises(ConfigError) as e:
        rp.extract_records(raw, RecordSpec(id="$.id", event_time="kafka_timestamp"),
                          drops=Drops(where=where, fields={"amount": "$.amount"}))
    assert "\n" not in str(e.value) and f"drops.where {where!r}" in str(e.value)
    assert names.lower() in str(e.value).lower()


def test_extract_records_reads_json_paths_and_keeps_unreadable_values(
        spark: SparkSession) -> None:
    raw = spark.createDataFrame([
        (b"k1", b'{"o": {"id": 7}, "t": "2026-11-20T05:00:00Z"}', 0, 1, at(300)),
        (b"k2", b"<not json>", 0, 2, at(301)),
        (b"k3", b'{"t": "2026-11-20T06:00:00Z"}', 0, 3, at(302)),
    ], KAFKA_ROWS)
    recs = rp.extract_records(raw, RecordSpec(id="$.o.id", event_time="$.t")).collect()
    assert [(r["id"], r["event_time"]) for r in recs] == [
        ("7", datetime(2026, 11, 20, 5)), (None, None), (None, datetime(2026, 11, 20, 6))]
    by_key = rp.extract_records(raw, RecordSpec(id="key", event_time="kafka_timestamp")
                               ).collect()
    assert [r["id"] for r in by_key] == ["k1", "k2", "k3"]


def test_fingerprint_ignores_order_and_sees_a_changed_id(spark: SparkSession) -> None:
    def fp(rows: list[tuple[str, datetime, int, int, datetime]]) -> str:
        row = rp.summarize(spark.createDataFrame(rows, TOPIC), START, END).first()
        assert row is not None
        return str(row["fingerprint"])

    a = [("1", at(1), 0, 1, at(1)), ("2", at(2), 0, 2, at(2))]
    assert fp(a) == fp(list(reversed(a)))
    assert fp(a) != fp([("1", at(1), 0, 1, at(1)), ("3", at(2), 0, 2, at(2))])


def test_a_hash_sum_is_the_exact_sum_of_signed_64_bit_hashes(spark: SparkSession) -> None:
    import random

    rnd = random.Random(7)
    edges = [2**63 - 1, -2**63, -1, 0, 1, 2**48, -2**48, 0xFFFF, -0x10000]
    cases = [edges, [2**63 - 1] * 1000, [-2**63] * 1000, [None, None], [],
             [rnd.randrange(-2**63, 2**63) for _ in range(5000)]]
    schema = StructType([StructField("h", LongType())])
    for hashes in cases:
        df = spark.createDataFrame([(h,) for h in hashes], schema)
        got = df.agg(rp.hash_sum(df["h"]).alias("s")).first()
        assert got is not None
        assert got["s"] == str(sum(h for h in hashes if h is not None)), hashes[:3]


def test_digests_without_the_fields_match_the_summary_and_see_one_changed_byte(
        spark: SparkSession) -> None:
    """What a later replay sums (no value read) equals what the first replay's summary sums,
    for every record format path, a change stream's tombstones left out by both."""
    rows = [(b"k1", b'{"id": 7, "t": "2026-11-20T05:00:00Z"}', 0, 1, at(300)),
            (b"k2", b"<not json>", 0, 2, at(301)),
            (b"k3", None, 1, 3, at(302))]  # a tombstone: no record of a change stream
    specs = [RecordSpec(id="$.id", event_time="$.t"),
             RecordSpec(id="$.o.id", event_time="kafka_timestamp"),
             RecordSpec(id="$.id", event_time="$.t", envelope="debezium")]

    def digest(found: list[tuple[Any, ...]], spec: RecordSpec) -> tuple[str, str]:
        raw = spark.createDataFrame(found, KAFKA_ROWS)
        records = rp.extract_records(raw.withColumn("digest", rp.record_digest()), spec)
        full = rp.summarize(records, START, END).first()
        quick = rp.digests(raw, spec).first()
        assert full is not None and quick is not None
        assert full["read"] == quick["read"]
        return str(full["digest"]), str(quick["digest"])

    for spec in specs:
        full, quick = digest(rows, spec)
        assert full == quick, spec
        changed = [rows[0], (b"k2", b"<not json!", 0, 2, at(301)), rows[2]]
        assert digest(changed, spec)[1] != quick, spec
        moved = [rows[0], (b"k2", b"<not json>", 0, 9, at(301)), rows[2]]
        assert digest(moved, spec)[1] != quick, spec


def test_top_level_fields_are_parsed_once_with_the_same_answer(spark: SparkSession) -> None:
    raw = spark.createDataFrame([
        (b"k1", b'{"id": 7, "t": "2026-11-20T05:00:00Z"}', 0, 1, at(300)),
        (b"k2", b"<not json>", 0, 2, at(301)),
        (b"k3", b'{"t": "2026-11-20T06:00:00Z"}', 0, 3, at(302)),
    ], KAFKA_ROWS)
    fast = rp.extract_records(raw, RecordSpec(id="$.id", event_time="$.t"))  # one parse each
    assert "json_tuple" in fast._jdf.queryExecution().analyzed().toString()
    got = [(r["id"], r["event_time"], r["offset"]) for r in fast.collect()]
    assert got == [("7", datetime(2026, 11, 20, 5), 1), (None, None, 2),
                   (None, datetime(2026, 11, 20, 6), 3)]
    assert fast.columns == ["id", "event_time", "partition", "offset", "kafka_ts", "reason"]
    assert [r["reason"] for r in fast.collect()] == [None, "no readable id at $.id",
                                                     "no readable id at $.id"]


def test_records_stamped_outside_the_window_between_its_offsets_are_out_of_order(
        spark: SparkSession) -> None:
    closes = END + timedelta(minutes=10)
    rows = [("1", at(1), 0, 1, at(1)),
            ("2", at(2), 0, 2, END + timedelta(minutes=5)),   # inside grace: late, in order
            ("3", at(3), 0, 3, closes + timedelta(days=1)),   # a later day, before a window one
            ("4", at(4), 0, 4, START - timedelta(hours=1))]   # an earlier day, after the start
    row = rp.summarize(spark.createDataFrame(rows, TOPIC), START, END, closes).first()
    assert row is not None and row["out_of_order"] == 2


def test_disorder_within_the_margin_hides_nothing_and_what_came_after_grace_is_not_counted(
        spark: SparkSession) -> None:
    closes = END + timedelta(minutes=10)
    margin = timedelta(minutes=5)
    rows = [("1", at(1), 0, 1, at(1)),
            ("2", at(2), 0, 2, START - timedelta(minutes=3)),   # stamped early, within margin
            ("3", END + timedelta(hours=1), 0, 3, closes + timedelta(minutes=2)),  # next window
            ("4", at(4), 0, 4, closes - timedelta(seconds=1)),  # after it: late, inside grace
            ("5", at(5), 0, 5, closes + timedelta(minutes=1)),  # after grace: lost, not counted
            (None, None, 0, 6, closes + timedelta(minutes=1)),  # unreadable, the next window's
            (None, None, 0, 7, at(7))]                          # unreadable, this window's
    row = rp.summarize(spark.createDataFrame(rows, TOPIC), START, END, closes, margin).first()
    assert row is not None
    assert (row["read"], row["count"], row["unidentifiable"], row["out_of_order"]) == (7, 3, 1, 0)
    wide = [*rows, ("8", at(8), 0, 8, closes + timedelta(minutes=6))]  # beyond the margin
    row = rp.summarize(spark.createDataFrame(wide, TOPIC), START, END, closes, margin).first()
    assert row is not None and row["out_of_order"] == 1
