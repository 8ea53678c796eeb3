"""Marks tallied per kind, place and bucket: the few rows that reach the driver."""

from __future__ import annotations

from datetime import timedelta

import pytest

pytestmark = pytest.mark.unit

pyspark = pytest.importorskip("pyspark")
from pyspark.sql import SparkSession  # noqa: E402

from kafka_recon.spark import compare as cmp  # noqa: E402
from kafka_recon.spark import tally as tl  # noqa: E402
from tests.unit.spark.frames import END, HOUR, START, TOPIC, at, compared, marked  # noqa: E402


def test_one_comparison_marks_every_hops_missing_unexpected_and_duplicate_ids(
        spark: SparkSession) -> None:
    db = [(str(i), at(i)) for i in range(1, 6)]
    topic = [("1", at(1)), ("1", at(1)), ("2", at(2)), ("3", at(3)), ("5", at(5))]
    sink = [("1", at(1)), ("1", at(1)), ("2", at(2)), ("3", at(3)), ("3", at(3)),
            ("3", at(3)), ("x", at(70)), ("4", at(4))]
    # hops: db -> topic (0 -> 1), topic -> sink (1 -> 2, every id tier before it: 0 and 1)
    m = cmp.marks(compared(spark, db, topic, sink), 3, [(0, 1, [0]), (1, 2, [0, 1])]).cache()
    assert marked(m, "missing", 0) == [("4",)]
    assert marked(m, "missing", 1) == [("5",)]
    # 4 skipped the topic but came from the db: not unexpected; x came from nowhere
    assert marked(m, "unexpected", 1) == [("x",)]
    assert marked(m, "unexpected", 0) == []
    assert marked(m, "duplicate", 0, "id", "value") == [("1", 1)]
    # 1 is twice in topic and sink alike: the topic's duplicate, not the sink's
    assert marked(m, "duplicate", 1, "id", "value") == [("3", 2)]
    assert marked(m, "present", 2) == [("1",), ("2",), ("3",), ("4",), ("x",)]
    # each in the bucket of its own tier: x, from nowhere, in the sink's
    got = {(r["kind"], r["at"], r["bucket"]): r["n"] for r in tl.tally(m).collect()}
    hour = START.replace(tzinfo=None)
    assert got[("unexpected", 1, hour + timedelta(hours=1))] == 1
    assert got[("duplicate", 1, hour)] == 2 and got[("present", 0, hour)] == 5


def test_records_are_tallied_per_bucket_with_the_unidentifiable_and_the_late(
        spark: SparkSession) -> None:
    rows = [("1", at(1), 0, 10, at(1)), (None, at(2), 1, 11, at(2)),
            ("3", None, 2, 12, at(3)), ("4", at(61), 0, 13, END + timedelta(minutes=2)),
            ("5", END + timedelta(minutes=1), 0, 14, END + timedelta(minutes=1))]
    m = tl.record_marks(spark.createDataFrame(rows, TOPIC), 1, START, END, HOUR, "kafka_ts",
                       is_topic=True)
    got = {(r["kind"], r["bucket"], r["part"]): (r["n"], r["first_offset"], r["last_offset"])
           for r in tl.tally(m, records=True).collect()}
    hour = START.replace(tzinfo=None)
    assert {k: v[0] for k, v in got.items()} == {
        ("record", hour, None): 1, ("record", hour + timedelta(hours=1), None): 1,
        ("unidentifiable", hour, None): 2, ("late", hour + timedelta(hours=1), None): 1,
        ("span", None, 0): 2}
    assert got[("span", None, 0)] == (2, 10, 13)  # the window's records of partition 0


def test_the_findings_are_read_in_as_many_partitions_as_they_need_not_the_comparisons(
        spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cached in the comparison's partitions (40 here), three findings are read in the two a
    core needs at least; findings as many as every id keep the partitions they need."""
    from pyspark.sql import functions as F

    from kafka_recon.spark import read as rd

    ids = spark.range(4_000).select(F.col("id").cast("string").alias("id"),
                                    F.lit(at(1)).alias("event_time"))
    tiers = [rd.window_records(t, START, END, HOUR)
             for t in (ids, ids.where(~F.col("id").isin("7", "70", "71")))]
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "40")
    try:
        per_id, findings = tl.tally_keeping_findings(cmp.marks(cmp.compare(tiers), 2,
                                                               [(0, 1, [0])]))
        assert findings.rdd.getNumPartitions() == 40
        read = tl.to_read(findings, per_id)
        assert read.rdd.getNumPartitions() == 1  # 3 findings: one partition holds them
        assert sorted(r["id"] for r in read.collect()) == ["7", "70", "71"]
        # 3 findings, as if a partition held one: they need three
        monkeypatch.setattr("kafka_recon.spark.conf.RECORDS_PER_PARTITION", 1)
        assert tl.to_read(findings, per_id).rdd.getNumPartitions() == 3
        findings.unpersist()
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
