"""The one comparison: every hop's missing, unexpected, duplicate and filtered ids, read off
one grouping by id."""

from __future__ import annotations

from datetime import timedelta

import pytest

pytestmark = pytest.mark.unit

pyspark = pytest.importorskip("pyspark")
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql.types import (  # noqa: E402
    BooleanType,
    StructField,
    StructType,
)

from kafka_recon.spark import compare as cmp  # noqa: E402
from kafka_recon.spark import read as rd  # noqa: E402
from tests.unit.spark.frames import END, HOUR, START, TABLE, TOPIC, at, counts, ids, marked, table  # noqa: E402


def test_missing_is_an_exact_anti_join(spark: SparkSession) -> None:
    up = counts(spark, [(str(i), at(i)) for i in range(10)])
    down = counts(spark, [(str(i), at(i)) for i in range(10) if i not in (3, 7)])
    assert ids(cmp.missing(up, down)) == [("3",), ("7",)]
    assert ids(cmp.missing(down, up)) == []


def test_a_change_stream_counts_an_id_once_however_many_changes_carry_it(
        spark: SparkSession) -> None:
    db = [("1", at(1)), ("2", at(2))]
    changes = [("1", at(1)), ("1", at(2)), ("1", at(3)), ("2", at(2))]
    wide = cmp.compare([rd.window_records(table(spark, t), START, END, HOUR)
                      for t in (db, changes)], collapse=frozenset({1}))
    assert marked(cmp.marks(wide, 2, [(0, 1, [0])]), "duplicate", 0) == []


def test_a_change_stream_that_captured_a_row_twice_has_a_copy_updates_do_not(
        spark: SparkSession) -> None:
    """A snapshot read again (a source connector that lost its offsets) captures each row a
    second time: two creates or snapshot reads of one id are a copy; updates never are."""
    from pyspark.sql.types import StringType

    db = table(spark, [("1", at(1)), ("2", at(2)), ("3", at(3))])
    ops = StructType([*TABLE.fields, StructField("op", StringType())])
    changes = spark.createDataFrame([
        ("1", at(1), "c"), ("1", at(1), "u"), ("1", at(1), "u"),   # created, updated twice
        ("2", at(2), "c"), ("2", at(2), "r"),                       # captured again
        ("3", at(3), "r"), ("3", at(3), "r"), ("3", at(3), "d")], ops)
    sink = table(spark, [("1", at(1)), ("2", at(2)), ("2", at(2)), ("3", at(3)),
                         ("3", at(3))])
    wide = cmp.compare([rd.window_records(t, START, END, HOUR) for t in (db, changes, sink)],
                       collapse=frozenset({1}))
    m = cmp.marks(wide, 3, [(0, 1, [0]), (1, 2, [0, 1])]).cache()
    assert marked(m, "duplicate", 0) == [("2",), ("3",)]
    # the sink's copies are the topic's, not its own
    assert marked(m, "duplicate", 1) == []


def test_a_missing_id_a_sinks_dead_letter_queue_holds_is_dead_lettered_not_missing(
        spark: SparkSession) -> None:
    topic = table(spark, [(str(i), at(i)) for i in range(1, 6)])
    sink = table(spark, [("1", at(1)), ("2", at(2))])
    queue = table(spark, [("3", at(3)), ("4", at(4)), ("99", at(9))])  # 99: not this window's
    wide = cmp.compare([rd.window_records(t, START, END, HOUR) for t in (topic, sink, queue)])
    m = cmp.marks(wide, 2, [(0, 1, [0])], dead={0: 2}).cache()
    assert marked(m, "dead_lettered", 0) == [("3",), ("4",)]
    assert marked(m, "missing", 0) == [("5",)]
    assert marked(m, "unexpected", 0) == []


def test_an_id_every_record_of_which_the_processor_drops_on_purpose_is_filtered_not_missing(
        spark: SparkSession) -> None:
    mark = StructType([*TABLE.fields, StructField("dropped", BooleanType())])
    up = spark.createDataFrame([
        ("kept", at(1), False), ("lost", at(2), False),
        ("on-purpose", at(3), True), ("on-purpose", at(3), True),
        ("half", at(4), True), ("half", at(4), False),  # one copy should have passed
        ("passed-anyway", at(5), True)], mark)
    down = table(spark, [("kept", at(1)), ("passed-anyway", at(5))])
    wide = cmp.compare([rd.window_records(t, START, END, HOUR) for t in (up, down)],
                     dropping=frozenset({0}))
    m = cmp.marks(wide, 2, [(0, 1, [0])], dropping=frozenset({0})).cache()
    assert marked(m, "missing", 0) == [("half",), ("lost",)]
    assert marked(m, "filtered", 0) == [("on-purpose",)]
    assert marked(m, "unexpected", 0) == [] and marked(m, "duplicate", 0) == []


def test_late_is_a_window_record_that_arrived_after_the_end(spark: SparkSession) -> None:
    rows = [("on-time", at(10), 0, 1, at(11)),
            ("late", END - timedelta(minutes=1), 0, 2, END + timedelta(minutes=3)),
            ("next-window", END + timedelta(minutes=1), 0, 3, END + timedelta(minutes=1))]
    recs = rd.window_records(spark.createDataFrame(rows, TOPIC), START, END, HOUR)
    assert ids(cmp.late(recs, END)) == [("late",)]


def test_the_comparison_shuffles_records_by_id_before_aggregating_them(
        spark: SparkSession) -> None:
    # an id is nearly always once per tier: an aggregation of each tier's partition before the
    # shuffle merges nothing, and at 10M records its spills ran the driver out of heap
    tiers = [rd.window_records(table(spark, [(str(i), at(i)) for i in range(n)]), START, END,
                               HOUR) for n in (10, 8)]
    wide = cmp.compare(tiers)
    plan = wide._jdf.queryExecution().executedPlan().toString()
    below = plan.split("Exchange hashpartitioning(id", 1)
    assert len(below) == 2 and "HashAggregate" in below[0], plan
    assert "HashAggregate" not in below[1], plan
    assert wide.count() == 10
