"""The evidence of causes: runs of offsets, the upstream's order, the copies' stamps,
summarised in one job."""

from __future__ import annotations

from datetime import timedelta

import pytest

pytestmark = pytest.mark.unit

pyspark = pytest.importorskip("pyspark")
from pyspark.sql import DataFrame, SparkSession  # noqa: E402

from kafka_recon.spark import compare as cmp  # noqa: E402
from kafka_recon.spark import evidence as ev  # noqa: E402
from kafka_recon.spark import read as rd  # noqa: E402
from kafka_recon.spark import tally as tl  # noqa: E402
from tests.unit.spark.frames import END, HOUR, START, TOPIC, at, table  # noqa: E402


def test_runs_group_marked_records_by_consecutive_window_records_per_partition(
        spark: SparkSession) -> None:
    offsets = [0, 1, 2, 3, 4, 6, 7, 8, 9, 10]  # offset 5: a transaction marker, no record
    rows = [(str(i + 1), at(i), 0, o, at(i)) for i, o in enumerate(offsets)]
    rows += [("a", at(1), 1, 0, at(1)), ("b", at(2), 1, 1, at(2))]
    topic = spark.createDataFrame(rows, TOPIC)
    marked = table(spark, [("4", None), ("5", None), ("6", None), ("9", None), ("b", None)])
    got = sorted((r["partition"], r["first_offset"], r["last_offset"], r["records"])
                 for r in ev.runs_of(marked, ev.rank_topic(topic)).frame.collect())
    # the marker at offset 5 does not split 4, 5, 6 (offsets 3, 4, 6)
    assert got == [(0, 3, 6, 3), (0, 9, 9, 1), (1, 1, 1, 1)]
    summary = ev.summary(ev.runs_of(marked, ev.rank_topic(topic))).as_json()
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
    assert ev.needs_sort(spans) and not ev.needs_sort({k: spans[k] for k in ("1", "2")})
    ranks = {(r["partition"], r["offset"]): r["rank"]
             for r in ev.rank_topic(topic, spans).collect()}
    assert ranks == {(0, 0): 1, (0, 1): 2, (0, 3): 3, (0, 4): 4,  # the marker splits nothing
                     **{(1, o): o + 1 for o in range(5)},
                     **{(2, o): o - 99 for o in range(100, 104)}}
    marked = table(spark, [("1", None), ("2", None), ("b1", None), ("b2", None), ("b4", None),
                           ("c101", None), ("c102", None), ("c103", None)])

    def runs(ranked: DataFrame) -> list[tuple[int, int, int, int]]:
        return sorted((r["partition"], r["first_offset"], r["last_offset"], r["records"])
                      for r in ev.runs_of(marked, ranked).frame.collect())

    want = [(0, 1, 3, 2), (1, 1, 2, 2), (1, 4, 4, 1), (2, 101, 103, 3)]
    assert runs(ev.rank_topic(topic)) == want  # every partition sorted
    assert runs(ev.rank_topic(topic, spans)) == want
    gapless = topic.where("partition > 0")
    assert runs(ev.rank_topic(gapless, {k: spans[k] for k in ("1", "2")})) == want[1:]


def test_findings_tallied_through_their_cache_are_broadcast_to_the_evidence(
        spark: SparkSession) -> None:
    from pyspark.sql import functions as F

    # 20,000 ids, three lost at the hop; the broadcast threshold lowered under the comparison's
    # estimated size, far above what three findings hold
    ids = spark.range(20_000).select(F.col("id").cast("string").alias("id"),
                                     F.lit(at(1)).alias("event_time"))
    tiers = [rd.window_records(t, START, END, HOUR)
             for t in (ids, ids.where(~F.col("id").isin("7", "70", "71")))]
    marked = cmp.marks(cmp.compare(tiers), 2, [(0, 1, [0])])
    topic = spark.range(20_000).select(
        F.col("id").cast("string").alias("id"), F.lit(0).alias("partition"),
        F.col("id").alias("offset"), F.lit(at(2)).alias("kafka_ts"),
        F.lit(at(1)).alias("event_time"), (F.col("id") + 1).alias("rank"))
    threshold = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", str(64 * 1024))
    try:
        per_id, findings = tl.tally_keeping_findings(marked)
        assert sum(per_id[("missing", 0)].values()) == 3
        assert sum(per_id[("present", 0)].values()) == 20_000
        runs = ev.runs_of(findings.where(F.col("kind") == "missing"), topic).frame
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
    up = rd.window_records(table(spark, rows), START, END, HOUR)
    marked = table(spark, [("2", None), ("3", None), ("x", None), ("4", None), ("7", None),
                           ("10", None)])
    got = sorted((r["first_id"], r["last_id"], r["records"])
                 for r in ev.upstream_runs(marked, up).frame.collect())
    # 2, 3, x, 4 are consecutive in event time; 7 alone; "10" ties "y" at minute 10 and
    # sorts first, so it is alone too
    assert got == [("10", "10", 1), ("2", "4", 4), ("7", "7", 1)]
    s = ev.summary(ev.upstream_runs(marked, up)).as_json()
    assert (s["runs"], s["records"], s["singles"]) == (3, 6, 2)
    assert s["first_time"] == "2026-11-20T00:02:00Z" and s["last_time"] == "2026-11-20T00:10:00Z"
    assert s["largest"][0]["records"] == 4


def test_upstream_runs_rank_by_each_ids_first_event_and_sort_only_the_marked_minutes(
        spark: SparkSession) -> None:
    # many records in minutes nobody lost from come before and between: they count in the
    # ranks (a run stops at any record that was not lost) though their minutes are not sorted
    rows = [(f"a{k}", at(0.5)) for k in range(50)] + [("1", at(1)), ("2", at(2))] \
        + [(f"b{k}", at(2.5)) for k in range(30)] + [("3", at(3.2)), ("4", at(3.6))]
    up = rd.window_records(table(spark, rows), START, END, HOUR)
    marked = table(spark, [("1", None), ("2", None), ("3", None), ("4", None)])
    for unique in (False, True):
        got = sorted((r["first_id"], r["last_id"], r["records"])
                     for r in ev.upstream_runs(marked, up, unique).frame.collect())
        assert got == [("1", "2", 2), ("3", "4", 2)], unique
    # an id made twice: its first event places it, unless told each id is made once
    twice = rd.window_records(table(spark, [("1", at(1)), ("2", at(2)), ("3", at(3)),
                                            ("1", at(5)), ("9", at(6))]), START, END, HOUR)
    lost = table(spark, [("1", None), ("2", None)])
    assert sorted((r["first_id"], r["last_id"], r["records"])
                  for r in ev.upstream_runs(lost, twice).frame.collect()) == [("1", "2", 2)]


def test_upstream_runs_are_the_same_whatever_time_slice_the_records_are_ranked_in(
        spark: SparkSession) -> None:
    """A run crosses slices and a slice holds records of several runs; from a microsecond
    (a slice per record) to the whole hour (one slice), the runs are the same."""
    rows = [(f"r{k:03d}", at(k / 10)) for k in range(300)] + [("tie", at(5))]
    up = rd.window_records(table(spark, rows), START, END, HOUR)
    # one run across minutes 2..3, one inside minute 5 that ends at the id "tie" (same time as
    # r050, after it), singles, and the last record
    lost = [f"r{k:03d}" for k in (*range(15, 35), 50, 60, 61, 62, 120, 299)] + ["tie"]
    marked = table(spark, [(i, None) for i in lost])
    want = [("r015", "r034", 20), ("r050", "tie", 2), ("r060", "r062", 3), ("r120", "r120", 1),
            ("r299", "r299", 1)]
    for slice_us in (1, 1_000_000, 7_000_000, ev.MINUTE_US, 3_600_000_000):
        for unique in (False, True):
            got = sorted((r["first_id"], r["last_id"], r["records"])
                         for r in ev.upstream_runs(marked, up, unique, slice_us).frame.collect())
            assert got == want, (slice_us, unique)


def test_an_upstreams_time_slices_hold_a_few_dozen_records_each_and_are_never_too_many(
        ) -> None:
    day = timedelta(days=1)
    # 10M records in a day: slices of 553 ms, 64 records each on average
    assert ev.upstream_slice(10_000_000, day) == 552_960
    assert 86_400_000_000 // ev.upstream_slice(10_000_000, day) <= 10_000_000 // 64
    # a few records: one slice, the whole window
    assert ev.upstream_slice(10, day) == 86_400_000_000
    # a huge window: at most MOST_SLICES slices, every one at least a microsecond
    assert 86_400_000_000 // ev.upstream_slice(10**12, day) <= ev.MOST_SLICES
    assert ev.upstream_slice(10**12, timedelta(microseconds=5)) == 1


def test_copy_stamps_tell_a_resent_record_from_one_sent_anew(spark: SparkSession) -> None:
    rows = [("1", at(1), 0, 0, at(1.5)), ("1", at(1), 0, 5, at(1.5)),   # resent: same stamp
            ("2", at(2), 0, 1, at(2.5)), ("2", at(2), 0, 9, at(7)),     # sent anew
            ("3", at(3), 0, 2, at(3)), ("3", at(3), 0, 6, at(3)),       # stamped with event time
            ("4", at(4), 0, 3, at(4.5))]
    topic = spark.createDataFrame(rows, TOPIC)
    dup = table(spark, [("1", None), ("2", None), ("3", None)])
    assert ev.summary(ev.copies_of(dup, topic)).as_json() == {"ids": 3, "same_timestamp": 2,
                                                  "stamped_with_event_time": 1}


def test_evidence_tables_of_every_kind_summarised_together_say_what_each_says_alone(
        spark: SparkSession) -> None:
    rows = [(str(i), at(i), i % 2, i // 2, at(i)) for i in range(12)]
    rows += [("3", at(3), 1, 40, at(3)), ("4", at(4), 0, 41, at(30))]  # two copies
    topic = spark.createDataFrame(rows, TOPIC)
    up = rd.window_records(table(spark, [(str(i), at(i)) for i in range(12)]), START, END, HOUR)
    marked = table(spark, [(str(i), None) for i in (1, 3, 5, 6, 8, 9, 11)])
    dup = table(spark, [("3", None), ("4", None)])
    empty = table(spark, [])
    tables = {"runs": ev.runs_of(marked, ev.rank_topic(topic)),
              "shape": ev.upstream_runs(marked, up), "copies": ev.copies_of(dup, topic),
              "none": ev.runs_of(empty, ev.rank_topic(topic)),
              "no_shape": ev.upstream_runs(empty, up), "no_copies": ev.copies_of(empty, topic)}
    together = {k: s.as_json() for k, s in ev.summaries(tables).items()}
    assert together == {k: ev.summaries({k: df})[k].as_json() for k, df in tables.items()}
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


def test_every_table_asked_of_one_topic_is_read_in_one_pass_and_says_what_it_says_alone(
        spark: SparkSession) -> None:
    rows = [(str(i), at(i), i % 2, i // 2, at(i)) for i in range(12)]
    rows += [("3", at(3), 1, 40, at(3)), ("4", at(4), 0, 41, at(30))]  # two copies
    topic = spark.createDataFrame(rows, TOPIC).cache()
    ranked = ev.rank_topic(topic)
    lost = table(spark, [(str(i), None) for i in (1, 3, 5, 6, 8, 9, 11)])
    dup = table(spark, [("3", None), ("4", None)])
    empty = table(spark, [])
    # a hop into the topic and the hop out of it: the duplicates' one set asks two tables
    asks = {"lost": ("runs", lost), "dup_runs": ("runs", dup), "dup_stamps": ("copies", dup),
            "none": ("runs", empty), "no_copies": ("copies", empty)}
    read = ev.read_off_topic(ranked, asks)
    alone = {"lost": ev.runs_of(lost, ranked), "dup_runs": ev.runs_of(dup, ranked),
             "dup_stamps": ev.copies_of(dup, topic), "none": ev.runs_of(empty, ranked),
             "no_copies": ev.copies_of(empty, topic)}
    together = {k: s.as_json() for k, s in ev.summaries({}, [read]).items()}
    assert together == {k: ev.summary(df).as_json() for k, df in alone.items()}
    assert together["dup_stamps"] == {"ids": 2, "same_timestamp": 1, "stamped_with_event_time": 2}
    assert together["lost"]["records"] == 8
    # with tables given one by one beside it, each still says its own
    shape = ev.upstream_runs(lost, rd.window_records(
        table(spark, [(str(i), at(i)) for i in range(12)]), START, END, HOUR))
    mixed = ev.summaries({"shape": shape}, [read])
    assert mixed["shape"].as_json() == ev.summary(shape).as_json()
    assert {k: mixed[k].as_json() for k in asks} == together
    # one scan of the topic's records feeds every table: runs and copies read one match
    frame = read.frame
    frame.collect()
    plan = frame._jdf.queryExecution().executedPlan().toString()
    assert plan.count("InMemoryTableScan") == 1, plan


def test_the_tallies_and_the_evidence_never_ask_a_frame_for_its_columns(
        spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    # through a Spark Connect server, each such question is a round trip to the server (14 of
    # them were 0.6 s of a warm 10k window): what is built here says its columns instead
    rows = [(str(i), at(i), i % 2, i // 2, at(i)) for i in range(12)]
    rows += [("3", at(3), 1, 40, at(3))]
    topic = spark.createDataFrame(rows, TOPIC)
    up = rd.window_records(table(spark, [(str(i), at(i)) for i in range(12)]), START, END, HOUR)
    lost = table(spark, [(str(i), None) for i in (1, 3, 5)])
    dup = table(spark, [("3", None)])
    asked: list[str] = []
    real = type(topic).columns

    def columns(df: DataFrame) -> list[str]:
        asked.append("columns")
        return real.fget(df)  # type: ignore[no-any-return,attr-defined]

    monkeypatch.setattr(type(topic), "columns", property(columns))
    ranked = ev.rank_topic(topic)
    got = ev.summaries({"shape": ev.upstream_runs(lost, up),
                        "late": ev.after_grace(lost, topic)},
                       [ev.read_off_topic(ranked, {"runs": ("runs", lost),
                                                   "copies": ("copies", dup)})])
    per_record = tl.tallied(tl.record_marks(topic, 1, START, END, HOUR, "kafka_ts", True),
                            records=True)
    compared = cmp.compare([up, rd.window_records(topic, START, END, HOUR)])
    per_id = tl.tallied(cmp.marks(compared, 2, [(0, 1, [0])]))
    assert asked == []
    assert got["copies"].as_json()["ids"] == 1 and got["runs"].as_json()["records"] == 4
    assert sum(per_record[("record", 1)].values()) == 13 and per_id[("present", 0)]
