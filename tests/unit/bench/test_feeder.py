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
