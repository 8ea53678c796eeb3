"""The grid: a flow's scheduled windows over a span, each with the verdict it has or why it
has none, and since when a flow has been red."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kafka_recon.config import load_flows
from kafka_recon.outputs import grid

pytestmark = pytest.mark.unit

NOW = datetime(2026, 12, 6, 0, 7, tzinfo=UTC)
FLOWS = """
flows:
  fast:
    owners: [web@example.com]
    window: 5m
    record: {id: "$.id", event_time: "$.ts"}
    tiers:
      - {name: t, type: kafka, bootstrap: "b:9092", topic: t}
      - {name: s, type: sql, conn: "sqlite:///x.db",
         ids: "SELECT id, ts AS event_time FROM t WHERE ts >= :start AND ts < :end"}
"""


def run(start: str, end: str, status: str, tolerated: int = 0) -> dict[str, Any]:
    return {"flow": "fast", "window_start": start, "window_end": end, "status": status,
            "findings": 1 if status == "findings" else 0, "summary": f"fast: {status}",
            "recorded_at": end, "tolerated": tolerated}


@pytest.fixture
def flows(tmp_path: Any) -> Any:
    (tmp_path / "f.yaml").write_text(FLOWS)
    return load_flows(tmp_path / "f.yaml")


def test_each_scheduled_window_has_its_verdict_or_says_why_it_has_none(flows: Any) -> None:
    recorded = [run("2026-12-05T23:35:00Z", "2026-12-05T23:40:00Z", "ok"),
                run("2026-12-05T23:40:00Z", "2026-12-05T23:45:00Z", "ok", tolerated=3),
                run("2026-12-05T23:45:00Z", "2026-12-05T23:50:00Z", "findings"),
                run("2026-12-05T23:50:00Z", "2026-12-05T23:55:00Z", "inconclusive")]
    running = {("fast", "2026-12-05T23:55:00Z", "2026-12-06T00:00:00Z")}
    [row] = grid.build(flows, recorded, running, timedelta(minutes=35), NOW)
    assert [(c.start[11:16], c.verdict) for c in row.cells] == [
        ("23:35", "ok"), ("23:40", "tolerated"), ("23:45", "findings"),
        ("23:50", "inconclusive"), ("23:55", "running"), ("00:00", "not_closed"),
        ("00:05", "not_closed")]
    assert row.cells[2].folder == "2026-12-05T234500Z_2026-12-05T235000Z"
    assert row.cells[2].title.endswith(": findings. fast: findings")
    # red since the first of the unbroken red windows; the newest closed window's verdict
    assert (row.newest, row.red_since) == ("inconclusive", "2026-12-05T23:45:00Z")


def test_a_window_no_run_recorded_after_its_closing_is_a_gap_not_an_ok(flows: Any) -> None:
    [row] = grid.build(flows, [], set(), timedelta(hours=1), NOW)
    assert len(row.cells) == 12
    # closed 15 minutes after its end (grace and disorder): 23:45-23:50 was, 23:50-23:55 not
    assert [c.verdict for c in row.cells[7:]] == ["no_run"] + ["not_closed"] * 4
    assert {c.verdict for c in row.cells[:8]} == {"no_run"}
    assert row.newest == "no_run" and row.red_since is None


def test_a_day_of_five_minute_windows_is_288_cells_and_filters_keep_what_they_name(
        flows: Any) -> None:
    rows = grid.build(flows, [], set(), grid.SPANS["24h"], NOW)
    assert len(rows[0].cells) == 288
    assert grid.keep(rows, owner="WEB@") == rows
    assert grid.keep(rows, owner="orders") == []
    assert grid.keep(rows, cluster="b:9092") == rows and grid.keep(rows, cluster="x") == []
    assert grid.keep(rows, status="no_run") == rows and grid.keep(rows, status="red") == []
