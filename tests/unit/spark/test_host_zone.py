"""Every instant Spark hands to Python is labelled in UTC, whatever the host's zone: PySpark
turns a collected timestamp into a naive local datetime, which once labelled every bucket of a
host on Shanghai time 8 hours late."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

pytestmark = pytest.mark.unit

pyspark = pytest.importorskip("pyspark")
from pyspark.sql import SparkSession  # noqa: E402

from kafka_recon.spark import evidence as ev  # noqa: E402
from kafka_recon.spark import read as rd  # noqa: E402
from kafka_recon.spark import tally as tl  # noqa: E402
from tests.unit.spark.frames import END, HOUR, START, TOPIC, at, table  # noqa: E402


def test_buckets_are_labelled_in_utc_on_a_host_of_any_zone(spark: SparkSession,
                                                             host_zone: str) -> None:
    rows = [("1", at(1), 0, 10, at(1)), ("2", at(61), 0, 11, at(61)),
            ("3", at(23 * 60 + 59), 1, 12, END + timedelta(minutes=3))]
    m = tl.record_marks(spark.createDataFrame(rows, TOPIC), 1, START, END, HOUR, "kafka_ts",
                       is_topic=True)
    got = tl.tallied(m, records=True)
    assert got[("record", 1)] == {"2026-11-20T00:00:00Z": 1, "2026-11-20T01:00:00Z": 1,
                                  "2026-11-20T23:00:00Z": 1}, host_zone
    assert got[("late", 1)] == {"2026-11-20T23:00:00Z": 1}
    per = tl.bucket_counts(rd.window_records(table(spark, [(r[0], r[1]) for r in rows]),
                                             START, END, HOUR))
    assert sorted(per) == ["2026-11-20T00:00:00Z", "2026-11-20T01:00:00Z",
                           "2026-11-20T23:00:00Z"]


def test_buckets_across_a_daylight_saving_change_keep_their_utc_hours(
        spark: SparkSession, host_zone: str) -> None:
    # New York's clocks went back at 06:00Z on 2026-11-01: 05:00Z and 06:00Z are both 01:00
    # there, the hour a naive local time cannot tell apart
    start = datetime(2026, 11, 1, 4, tzinfo=UTC)
    end = start + timedelta(hours=4)
    rows = [(str(i), start + timedelta(minutes=30 + 60 * i)) for i in range(4)]
    per = tl.bucket_counts(rd.window_records(table(spark, rows), start, end, HOUR))
    assert per == {f"2026-11-01T0{h}:00:00Z": 1 for h in range(4, 8)}, host_zone


def test_evidence_times_are_utc_on_a_host_of_any_zone(spark: SparkSession,
                                                      host_zone: str) -> None:
    rows = [(str(i), at(i), 0, i, at(i)) for i in range(6)]
    topic = spark.createDataFrame(rows, TOPIC)
    up = rd.window_records(table(spark, [(str(i), at(i)) for i in range(6)]), START, END, HOUR)
    marked = table(spark, [(str(i), None) for i in (1, 2, 3)])
    got = {k: s.as_json() for k, s in ev.summaries(
        {"runs": ev.runs_of(marked, ev.rank_topic(topic)),
         "shape": ev.upstream_runs(marked, up)}).items()}
    assert got["runs"]["largest"][0]["first_ts"] == "2026-11-20T00:01:00Z", host_zone
    assert got["runs"]["largest"][0]["last_ts"] == "2026-11-20T00:03:00Z"
    assert (got["shape"]["first_time"], got["shape"]["last_time"]) == (
        "2026-11-20T00:01:00Z", "2026-11-20T00:03:00Z")
