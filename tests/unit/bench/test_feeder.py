"""bench/feeder.py: every flow's application writes its rows upstream and produces each one, its
Kafka timestamp the row's time (the loader and the real broker are run by `make bench-fleet`)."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bench.feeder import Feed

pytestmark = pytest.mark.unit


class Sent:
    """What a producer was given (a full queue once, as a busy producer's is)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.full_once = True
        self.polled = 0

    def produce(self, topic: str, key: str, value: bytes, timestamp: int) -> None:
        if self.full_once:
            self.full_once = False
            raise BufferError("queue full")
        self.records.append({"topic": topic, "key": key, "value": json.loads(value),
                             "timestamp": timestamp})

    def poll(self, timeout: float) -> int:
        self.polled += 1
        return 0


def test_each_row_goes_upstream_and_to_the_topic_with_its_time(tmp_path: Path) -> None:
    feed = Feed("f", "f_orders", tmp_path / "f.db", "dst_f", rate=2.0)
    feed.open()
    sent = Sent()
    t0 = datetime(2026, 12, 6, 10, 0, 0, tzinfo=UTC)
    feed.write([t0, t0 + timedelta(seconds=1)], sent)
    feed.write([t0 + timedelta(seconds=2)], sent)
    rows = sqlite3.connect(tmp_path / "f.db").execute("SELECT id, ts FROM src ORDER BY id")
    assert list(rows) == [(1, "2026-12-06 10:00:00"), (2, "2026-12-06 10:00:01"),
                          (3, "2026-12-06 10:00:02")]
    # a full queue is waited out, never a row dropped
    assert sent.polled == 1
    assert [(r["key"], r["value"]["id"], r["value"]["ts"], r["timestamp"])
            for r in sent.records] == [
        ("1", 1, "2026-12-06 10:00:00", int(t0.timestamp()) * 1000),
        ("2", 2, "2026-12-06 10:00:01", int(t0.timestamp()) * 1000 + 1000),
        ("3", 3, "2026-12-06 10:00:02", int(t0.timestamp()) * 1000 + 2000)]
    assert {r["topic"] for r in sent.records} == {"f_orders"}


def test_a_ticks_rows_are_written_upstream_in_one_commit(tmp_path: Path) -> None:
    # one commit a row (autocommit) fell minutes behind on a busy disk, and the late ticks
    # wrote rows stamped in the past: windows with records that looked lost
    feed = Feed("f", "f_orders", tmp_path / "f.db", "dst_f", rate=2.0)
    feed.open()
    assert feed.con is not None
    said: list[str] = []
    feed.con.set_trace_callback(said.append)
    t0 = datetime(2026, 12, 6, 10, 0, 0, tzinfo=UTC)
    feed.write([t0 + timedelta(seconds=k) for k in range(3)], Sent())
    assert [s for s in said if s in ("BEGIN", "COMMIT")] == ["BEGIN", "COMMIT"]
    assert said[0] == "BEGIN" and said[-1] == "COMMIT"


def test_the_producers_statistics_say_how_late_records_reached_the_broker() -> None:
    from bench.feeder import producer_stats

    raw = json.dumps({
        "time": 1796564215, "msg_cnt": 781,
        "brokers": {
            "bootstrap": {"nodeid": -1, "rtt": {"p99": 9_000_000, "max": 9_000_000}},
            "b1": {"nodeid": 1, "rtt": {"p99": 49_000, "max": 88_000},
                   "int_latency": {"p99": 126_000, "max": 110_662_000},
                   "waitresp_cnt": 2, "req_timeouts": 1, "txretries": 3}}})
    # the bootstrap entry is no broker: its figures are left out
    assert producer_stats(raw) == {
        "at": 1796564215, "queued": 781, "rtt_p99_s": 0.049, "rtt_max_s": 0.088,
        "wait_p99_s": 0.126, "wait_max_s": 110.662, "waiting_responses": 2, "timeouts": 1,
        "retries": 3}
