"""The reconcile and replay transforms on a local SparkSession with explicit schemas."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.unit

pyspark = pytest.importorskip("pyspark")
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql.types import (  # noqa: E402
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kafka_recon.config import Drops, RecordSpec  # noqa: E402
from kafka_recon.errors import ConfigError  # noqa: E402
from kafka_recon.spark import reconcile as R  # noqa: E402
from kafka_recon.spark import replay as P  # noqa: E402

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


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    from kafka_recon.spark.session import session

    s = session("kafka-recon unit", master="local[1]")
    yield s
    s.stop()


def at(minutes: float) -> datetime:
    return START + timedelta(minutes=minutes)


def table(spark: SparkSession, rows: list[tuple[str | None, datetime | None]]) -> DataFrame:
    return spark.createDataFrame(rows, TABLE)


def counts(spark: SparkSession, rows: list[tuple[str | None, datetime | None]]) -> DataFrame:
    """(id, n, bucket) of one id tier, as the reconcile step derives it from the comparison."""
    return R.ids_of(R.compare([R.window_records(table(spark, rows), START, END, HOUR)]), 0)


def compared(spark: SparkSession, *tiers: list[tuple[str | None, datetime | None]]
             ) -> DataFrame:
    return R.compare([R.window_records(table(spark, t), START, END, HOUR) for t in tiers])


def marked(df: DataFrame, kind: str, at: int, *cols: str) -> list[tuple]:
    return ids(df.where((df.kind == kind) & (df.at == at)), *cols)


def ids(df: DataFrame, *cols: str) -> list[tuple]:
    return sorted(tuple(r[c] for c in (cols or ("id",))) for r in df.collect())


def test_missing_is_an_exact_anti_join(spark: SparkSession) -> None:
    up = counts(spark, [(str(i), at(i)) for i in range(10)])
    down = counts(spark, [(str(i), at(i)) for i in range(10) if i not in (3, 7)])
    assert ids(R.missing(up, down)) == [("3",), ("7",)]
    assert ids(R.missing(down, up)) == []


def test_one_comparison_marks_every_hops_missing_unexpected_and_duplicate_ids(
        spark: SparkSession) -> None:
    db = [(str(i), at(i)) for i in range(1, 6)]
    topic = [("1", at(1)), ("1", at(1)), ("2", at(2)), ("3", at(3)), ("5", at(5))]
    sink = [("1", at(1)), ("1", at(1)), ("2", at(2)), ("3", at(3)), ("3", at(3)),
            ("3", at(3)), ("x", at(70)), ("4", at(4))]
    # hops: db -> topic (0 -> 1), topic -> sink (1 -> 2, every id tier before it: 0 and 1)
    m = R.marks(compared(spark, db, topic, sink), 3, [(0, 1, [0]), (1, 2, [0, 1])]).cache()
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
    got = {(r["kind"], r["at"], r["bucket"]): r["n"] for r in R.tally(m).collect()}
    hour = START.replace(tzinfo=None)
    assert got[("unexpected", 1, hour + timedelta(hours=1))] == 1
    assert got[("duplicate", 1, hour)] == 2 and got[("present", 0, hour)] == 5


def test_a_change_stream_counts_an_id_once_however_many_changes_carry_it(
        spark: SparkSession) -> None:
    db = [("1", at(1)), ("2", at(2))]
    changes = [("1", at(1)), ("1", at(2)), ("1", at(3)), ("2", at(2))]
    wide = R.compare([R.window_records(table(spark, t), START, END, HOUR)
                      for t in (db, changes)], collapse=frozenset({1}))
    assert marked(R.marks(wide, 2, [(0, 1, [0])]), "duplicate", 0) == []


def test_an_id_every_record_of_which_the_processor_drops_on_purpose_is_filtered_not_missing(
        spark: SparkSession) -> None:
    mark = StructType([*TABLE.fields, StructField("dropped", BooleanType())])
    up = spark.createDataFrame([
        ("kept", at(1), False), ("lost", at(2), False),
        ("on-purpose", at(3), True), ("on-purpose", at(3), True),
        ("half", at(4), True), ("half", at(4), False),  # one copy should have passed
        ("passed-anyway", at(5), True)], mark)
    down = table(spark, [("kept", at(1)), ("passed-anyway", at(5))])
    wide = R.compare([R.window_records(t, START, END, HOUR) for t in (up, down)],
                     dropping=frozenset({0}))
    m = R.marks(wide, 2, [(0, 1, [0])], dropping=frozenset({0})).cache()
    assert marked(m, "missing", 0) == [("half",), ("lost",)]
    assert marked(m, "filtered", 0) == [("on-purpose",)]
    assert marked(m, "unexpected", 0) == [] and marked(m, "duplicate", 0) == []


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
        got = P.extract_records(raw, spec, drops=drops).collect()
        assert [r["dropped"] for r in got] == [True, False, False, False, False]
        assert [r["id"] for r in got] == ["1", "2", "3", "4", None]


@pytest.mark.parametrize(("where", "names"), [("amount <=", "syntax"),
                                              ("amuont > 0", "amuont")])
def test_a_drop_expression_spark_cannot_read_is_one_config_error_line(
        spark: SparkSession, where: str, names: str) -> None:
    raw = spark.createDataFrame([(b"k", b'{"id": 1}', 0, 1, at(1))], KAFKA_ROWS)
    with pytest.raises(ConfigError) as e:
        P.extract_records(raw, RecordSpec(id="$.id", event_time="kafka_timestamp"),
                          drops=Drops(where=where, fields={"amount": "$.amount"}))
    assert "\n" not in str(e.value) and f"drops.where {where!r}" in str(e.value)
    assert names.lower() in str(e.value).lower()


def test_bucket_edges_belong_to_the_later_bucket(spark: SparkSession) -> None:
    df = R.window_records(table(spark, [("a", at(59.99)), ("b", at(60)), ("c", at(119.99))]),
                          START, END, HOUR)
    got = {r["id"]: r["bucket"] for r in df.collect()}
    assert got["a"] == START.replace(tzinfo=None)
    assert got["b"] == got["c"] == (START + timedelta(hours=1)).replace(tzinfo=None)


def test_window_is_half_open(spark: SparkSession) -> None:
    df = R.window_records(table(spark, [("first", START), ("last", END - timedelta(seconds=1)),
                                        ("end", END), ("before", START - timedelta(seconds=1))]),
                          START, END, HOUR)
    assert ids(df) == [("first",), ("last",)]


def test_late_is_a_window_record_that_arrived_after_the_end(spark: SparkSession) -> None:
    rows = [("on-time", at(10), 0, 1, at(11)),
            ("late", END - timedelta(minutes=1), 0, 2, END + timedelta(minutes=3)),
            ("next-window", END + timedelta(minutes=1), 0, 3, END + timedelta(minutes=1))]
    recs = R.window_records(spark.createDataFrame(rows, TOPIC), START, END, HOUR)
    assert ids(R.late(recs, END)) == [("late",)]


def test_records_are_tallied_per_bucket_with_the_unidentifiable_and_the_late(
        spark: SparkSession) -> None:
    rows = [("1", at(1), 0, 10, at(1)), (None, at(2), 1, 11, at(2)),
            ("3", None, 2, 12, at(3)), ("4", at(61), 0, 13, END + timedelta(minutes=2)),
            ("5", END + timedelta(minutes=1), 0, 14, END + timedelta(minutes=1))]
    m = R.record_marks(spark.createDataFrame(rows, TOPIC), 1, START, END, HOUR, "kafka_ts",
                       is_topic=True)
    got = {(r["kind"], r["bucket"], r["part"]): (r["n"], r["first_offset"], r["last_offset"])
           for r in R.tally(m).collect()}
    hour = START.replace(tzinfo=None)
    assert {k: v[0] for k, v in got.items()} == {
        ("record", hour, None): 1, ("record", hour + timedelta(hours=1), None): 1,
        ("unidentifiable", hour, None): 2, ("late", hour + timedelta(hours=1), None): 1,
        ("span", None, 0): 2}
    assert got[("span", None, 0)] == (2, 10, 13)  # the window's records of partition 0


def test_id_files_are_rfc4180_sorted_with_a_header_each_written_in_one_job(
        spark: SparkSession, tmp_path: Path) -> None:
    import csv

    odd = ["b", "a,1", 'say "hi"', "two\nlines", " padded ", "10", "9"]
    many = [str(i) for i in range(3000)]
    files = [R.IdFile(tmp_path / "missing" / "x.csv", ("id",),
                      R.id_rows(table(spark, [(i, at(1)) for i in odd]), ["id"], "id")),
             R.IdFile(tmp_path / "missing" / "y.csv", ("id",),
                      R.id_rows(table(spark, [(i, at(1)) for i in many]).repartition(7),
                                ["id"], "id")),
             R.IdFile(tmp_path / "missing" / "empty.csv", ("id",),
                      R.id_rows(table(spark, []), ["id"], "id"))]
    R.write_id_files(spark, files, tmp_path / ".scratch")
    with (tmp_path / "missing" / "x.csv").open(newline="", encoding="utf-8") as fh:
        assert [r["id"] for r in csv.DictReader(fh)] == sorted(odd)
    with (tmp_path / "missing" / "y.csv").open(newline="", encoding="utf-8") as fh:
        assert [r["id"] for r in csv.DictReader(fh)] == sorted(many)
    assert (tmp_path / "missing" / "empty.csv").read_text() == "id\n"
    assert not (tmp_path / ".scratch").exists()


def test_extract_records_reads_json_paths_and_keeps_unreadable_values(
        spark: SparkSession) -> None:
    raw = spark.createDataFrame([
        (b"k1", b'{"o": {"id": 7}, "t": "2026-11-20T05:00:00Z"}', 0, 1, at(300)),
        (b"k2", b"<not json>", 0, 2, at(301)),
        (b"k3", b'{"t": "2026-11-20T06:00:00Z"}', 0, 3, at(302)),
    ], KAFKA_ROWS)
    recs = P.extract_records(raw, RecordSpec(id="$.o.id", event_time="$.t")).collect()
    assert [(r["id"], r["event_time"]) for r in recs] == [
        ("7", datetime(2026, 11, 20, 5)), (None, None), (None, datetime(2026, 11, 20, 6))]
    by_key = P.extract_records(raw, RecordSpec(id="key", event_time="kafka_timestamp")
                               ).collect()
    assert [r["id"] for r in by_key] == ["k1", "k2", "k3"]


def test_fingerprint_ignores_order_and_sees_a_changed_id(spark: SparkSession) -> None:
    def fp(rows: list[tuple[str, datetime, int, int, datetime]]) -> str:
        row = P.summarize(spark.createDataFrame(rows, TOPIC), START, END).first()
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
        got = df.agg(P.hash_sum(df["h"]).alias("s")).first()
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
        records = P.extract_records(raw.withColumn("digest", P.record_digest()), spec)
        full = P.summarize(records, START, END).first()
        quick = P.digests(raw, spec).first()
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
    fast = P.extract_records(raw, RecordSpec(id="$.id", event_time="$.t"))  # one parse each
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
    row = P.summarize(spark.createDataFrame(rows, TOPIC), START, END, closes).first()
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
    row = P.summarize(spark.createDataFrame(rows, TOPIC), START, END, closes, margin).first()
    assert row is not None
    assert (row["read"], row["count"], row["unidentifiable"], row["out_of_order"]) == (7, 3, 1, 0)
    wide = [*rows, ("8", at(8), 0, 8, closes + timedelta(minutes=6))]  # beyond the margin
    row = P.summarize(spark.createDataFrame(wide, TOPIC), START, END, closes, margin).first()
    assert row is not None and row["out_of_order"] == 1


def test_runs_group_marked_records_by_consecutive_window_records_per_partition(
        spark: SparkSession) -> None:
    offsets = [0, 1, 2, 3, 4, 6, 7, 8, 9, 10]  # offset 5: a transaction marker, no record
    rows = [(str(i + 1), at(i), 0, o, at(i)) for i, o in enumerate(offsets)]
    rows += [("a", at(1), 1, 0, at(1)), ("b", at(2), 1, 1, at(2))]
    topic = spark.createDataFrame(rows, TOPIC)
    marked = table(spark, [("4", None), ("5", None), ("6", None), ("9", None), ("b", None)])
    got = sorted((r["partition"], r["first_offset"], r["last_offset"], r["records"])
                 for r in R.runs_of(marked, R.rank_topic(topic)).collect())
    # the marker at offset 5 does not split 4, 5, 6 (offsets 3, 4, 6)
    assert got == [(0, 3, 6, 3), (0, 9, 9, 1), (1, 1, 1, 1)]
    summary = R.summary(R.runs_of(marked, R.rank_topic(topic)))
    assert (summary["runs"], summary["records"], summary["partitions"]) == (3, 5, 2)
    assert summary["largest"][0]["first_offset"] == 3


def test_runs_rank_gapless_partitions_by_offset_without_a_sort_and_sort_the_rest(
        spark: SparkSession) -> None:
    # partition 0 has a gap (a marker at 2), partition 1 fills its span, partition 2 starts late
    rows = [(str(i), at(i), 0, o, at(i)) for i, o in enumerate([0, 1, 3, 4])]
    rows += [(f"b{o}", at(o), 1, o, at(o)) for o in range(5)]
    rows += [(f"c{o}", at(o), 2, o, at(o)) for o in range(100, 104)]
    topic = spark.createDataFrame(rows, TOPIC)
    spans = {"0": {"records": 4, "first_offset": 0, "last_offset": 4},
             "1": {"records": 5, "first_offset": 0, "last_offset": 4},
             "2": {"records": 4, "first_offset": 100, "last_offset": 103}}
    assert R.needs_sort(spans) and not R.needs_sort({k: spans[k] for k in ("1", "2")})
    ranks = {(r["partition"], r["offset"]): r["rank"]
             for r in R.rank_topic(topic, spans).collect()}
    assert ranks == {(0, 0): 1, (0, 1): 2, (0, 3): 3, (0, 4): 4,  # the marker splits nothing
                     **{(1, o): o + 1 for o in range(5)},
                     **{(2, o): o - 99 for o in range(100, 104)}}
    marked = table(spark, [("1", None), ("2", None), ("b1", None), ("b2", None), ("b4", None),
                           ("c101", None), ("c102", None), ("c103", None)])

    def runs(ranked: DataFrame) -> list[tuple[int, int, int, int]]:
        return sorted((r["partition"], r["first_offset"], r["last_offset"], r["records"])
                      for r in R.runs_of(marked, ranked).collect())

    want = [(0, 1, 3, 2), (1, 1, 2, 2), (1, 4, 4, 1), (2, 101, 103, 3)]
    assert runs(R.rank_topic(topic)) == want  # every partition sorted
    assert runs(R.rank_topic(topic, spans)) == want
    gapless = topic.where("partition > 0")
    assert runs(R.rank_topic(gapless, {k: spans[k] for k in ("1", "2")})) == want[1:]


def test_findings_tallied_through_their_cache_are_broadcast_to_the_evidence(
        spark: SparkSession) -> None:
    from pyspark.sql import functions as F

    # 20,000 ids, three lost at the hop; the broadcast threshold lowered under the comparison's
    # estimated size, far above what three findings hold
    ids = spark.range(20_000).select(F.col("id").cast("string").alias("id"),
                                     F.lit(at(1)).alias("event_time"))
    tiers = [R.window_records(t, START, END, HOUR)
             for t in (ids, ids.where(~F.col("id").isin("7", "70", "71")))]
    marked = R.marks(R.compare(tiers), 2, [(0, 1, [0])])
    topic = spark.range(20_000).select(
        F.col("id").cast("string").alias("id"), F.lit(0).alias("partition"),
        F.col("id").alias("offset"), F.lit(at(2)).alias("kafka_ts"),
        F.lit(at(1)).alias("event_time"), (F.col("id") + 1).alias("rank"))
    threshold = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", str(64 * 1024))
    try:
        per_id, findings = R.tally_keeping_findings(marked)
        assert sum(per_id[("missing", 0)].values()) == 3
        assert sum(per_id[("present", 0)].values()) == 20_000
        runs = R.runs_of(findings.where(F.col("kind") == "missing"), topic)
        plan = runs._jdf.queryExecution().executedPlan().toString()
        assert "BroadcastHashJoin" in plan and "SortMergeJoin" not in plan
        assert sorted((r["first_offset"], r["records"]) for r in runs.collect()) == \
            [(7, 1), (70, 2)]
        findings.unpersist()
    finally:  # the module's other tests keep Spark's threshold
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", threshold)


def test_upstream_runs_follow_the_upstreams_own_order_and_count_singles(
        spark: SparkSession) -> None:
    # ids made in time order, except "x" made between 3 and 4; ids tie-break equal times
    rows = [(str(i), at(i)) for i in range(1, 11)] + [("x", at(3.5)), ("y", at(10))]
    up = R.window_records(table(spark, rows), START, END, HOUR)
    marked = table(spark, [("2", None), ("3", None), ("x", None), ("4", None), ("7", None),
                           ("10", None)])
    got = sorted((r["first_id"], r["last_id"], r["records"])
                 for r in R.upstream_runs(marked, up).collect())
    # 2, 3, x, 4 are consecutive in event time; 7 alone; "10" ties "y" at minute 10 and
    # sorts first, so it is alone too
    assert got == [("10", "10", 1), ("2", "4", 4), ("7", "7", 1)]
    s = R.summary(R.upstream_runs(marked, up))
    assert (s["runs"], s["records"], s["singles"]) == (3, 6, 2)
    assert s["first_time"] == "2026-11-20T00:02:00Z" and s["last_time"] == "2026-11-20T00:10:00Z"
    assert s["largest"][0]["records"] == 4


def test_copy_stamps_tell_a_resent_record_from_one_sent_anew(spark: SparkSession) -> None:
    rows = [("1", at(1), 0, 0, at(1.5)), ("1", at(1), 0, 5, at(1.5)),   # resent: same stamp
            ("2", at(2), 0, 1, at(2.5)), ("2", at(2), 0, 9, at(7)),     # sent anew
            ("3", at(3), 0, 2, at(3)), ("3", at(3), 0, 6, at(3)),       # stamped with event time
            ("4", at(4), 0, 3, at(4.5))]
    topic = spark.createDataFrame(rows, TOPIC)
    dup = table(spark, [("1", None), ("2", None), ("3", None)])
    assert R.summary(R.copies_of(dup, topic)) == {"ids": 3, "same_timestamp": 2,
                                                  "stamped_with_event_time": 1}


def test_evidence_tables_of_every_kind_summarised_together_say_what_each_says_alone(
        spark: SparkSession) -> None:
    rows = [(str(i), at(i), i % 2, i // 2, at(i)) for i in range(12)]
    rows += [("3", at(3), 1, 40, at(3)), ("4", at(4), 0, 41, at(30))]  # two copies
    topic = spark.createDataFrame(rows, TOPIC)
    up = R.window_records(table(spark, [(str(i), at(i)) for i in range(12)]), START, END, HOUR)
    marked = table(spark, [(str(i), None) for i in (1, 3, 5, 6, 8, 9, 11)])
    dup = table(spark, [("3", None), ("4", None)])
    empty = table(spark, [])
    tables = {"runs": R.runs_of(marked, R.rank_topic(topic)),
              "shape": R.upstream_runs(marked, up), "copies": R.copies_of(dup, topic),
              "none": R.runs_of(empty, R.rank_topic(topic)),
              "no_shape": R.upstream_runs(empty, up), "no_copies": R.copies_of(empty, topic)}
    together = R.summaries(tables)
    assert together == {k: R.summaries({k: df})[k] for k, df in tables.items()}
    # partition 1 holds 1, 3, 5 | 9, 11 and 3's copy (offsets 0-2, 4, 5, 40: the copy
    # follows 11); partition 0 holds 6, 8 (offsets 3, 4)
    assert (together["runs"]["runs"], together["runs"]["records"],
            together["runs"]["partitions"]) == (3, 8, 2)
    assert together["runs"]["largest"][0] == {
        "partition": 1, "first_offset": 0, "last_offset": 2, "records": 3,
        "first_ts": "2026-11-20T00:01:00Z", "last_ts": "2026-11-20T00:05:00Z"}
    # in the upstream's order: 1 | 3 | 5, 6 | 8, 9 | 11
    assert (together["shape"]["runs"], together["shape"]["singles"]) == (5, 3)
    assert together["shape"]["largest"][0]["records"] == 2
    assert together["copies"] == {"ids": 2, "same_timestamp": 1, "stamped_with_event_time": 2}
    assert together["none"] == {"runs": 0, "records": 0, "partitions": 0, "largest": []}
    assert together["no_shape"]["runs"] == 0 and together["no_shape"]["largest"] == []
    assert together["no_copies"]["ids"] == 0


def test_a_counter_that_missed_a_delivered_batch_gives_way_to_the_id_tiers(
        spark: SparkSession, tmp_path: Path) -> None:
    """An agent killed after delivering a batch it never counted drained: its counters say
    1000 lost inside it and 100 arriving from nowhere after it; the ids say 900 lost."""
    from types import SimpleNamespace

    from kafka_recon.runfolder import RunFolder

    names = ["db", "agent.source", "agent.sink", "topic"]
    points = [SimpleNamespace(name=n) for n in names]
    db = counts(spark, [(str(i), at(1)) for i in range(2000)])
    topic = counts(spark, [(str(i), at(1)) for i in range(1100)])
    bucket = "2026-11-20T00:00:00Z"

    def hop(a: str, b: str, missing: int, unexpected: int) -> dict[str, Any]:
        return {"from": a, "to": b, "missing": missing, "unexpected": unexpected,
                "buckets": {"missing": {bucket: missing} if missing else {},
                            "unexpected": {bucket: unexpected} if unexpected else {}}}
    hops = [hop("db", "agent.source", 0, 0), hop("agent.source", "agent.sink", 1000, 0),
            hop("agent.sink", "topic", 0, 100)]
    R.name_ids_across_counts(points, {"db": db, "agent.source": None, "agent.sink": None,
                                      "topic": topic}, hops, RunFolder(tmp_path))
    lossy, gained = hops[1], hops[2]
    assert (lossy["missing"], gained["unexpected"]) == (900, 0)
    assert lossy["counter_gap"] == {"counted": 1000, "lost": 900,
                                    "passed_on_uncounted": {"agent.sink->topic": 100}}
    with open(lossy["missing_ids"]) as fh:
        assert len(fh.read().splitlines()) == 901  # a header and the 900 ids
    # counts that no later gain explains stay counted, unnamed
    hops = [hop("db", "agent.source", 0, 0), hop("agent.source", "agent.sink", 1000, 0),
            hop("agent.sink", "topic", 0, 0)]
    R.name_ids_across_counts(points, {"db": db, "agent.source": None, "agent.sink": None,
                                      "topic": topic}, hops, RunFolder(tmp_path / "b"))
    assert hops[1]["missing"] == 1000 and "missing_ids" not in hops[1]
