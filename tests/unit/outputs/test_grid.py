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


def run(start: str, end: str, status: str, tolerated: int = 0
        ) -> tuple[str, int, int, str, int, str]:
    def t(x: str) -> int:
        return int(datetime.fromisoformat(x.replace("Z", "+00:00")).timestamp())

    return ("fast", t(start), t(end), status, tolerated,
            "" if status == "ok" else f"fast: {status}")


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
    assert [(row.start_of(i)[11:16], v) for i, v in enumerate(row.verdicts())] == [
        ("23:35", "ok"), ("23:40", "tolerated"), ("23:45", "findings"),
        ("23:50", "inconclusive"), ("23:55", "running"), ("00:00", "not_closed"),
        ("00:05", "not_closed")]
    # the verdict line only where a window is not ok; on the schedule, no folder to name
    assert row.said == {2: "fast: findings", 3: "fast: inconclusive"} and row.folders == {}
    # red since the first of the unbroken red windows; the newest closed window's verdict
    assert (row.newest, row.red_since) == ("inconclusive", "2026-12-05T23:45:00Z")


def test_an_ad_hoc_window_off_the_schedule_takes_the_slot_its_start_falls_in(
        flows: Any) -> None:
    odd = run("2026-12-05T23:47:00Z", "2026-12-05T23:49:00Z", "findings")
    [row] = grid.build(flows, [odd], set(), timedelta(minutes=35), NOW)
    assert row.codes[2] == "f" and row.folders == {2: "2026-12-05T234700Z_2026-12-05T234900Z"}


def test_a_window_no_run_recorded_after_its_closing_is_a_gap_not_an_ok(flows: Any) -> None:
    [row] = grid.build(flows, [], set(), timedelta(hours=1), NOW)
    # closed 15 minutes after its end (grace and disorder): 23:45-23:50 was, 23:50-23:55 not
    assert row.codes == "n" * 8 + "c" * 4
    assert row.newest == "no_run" and row.red_since is None


def test_a_day_of_five_minute_windows_is_288_cells_and_filters_keep_what_they_name(
        flows: Any) -> None:
    rows = grid.build(flows, [], set(), grid.SPANS["24h"], NOW)
    assert len(rows[0].codes) == 288
    assert grid.keep(rows, owner="WEB@") == rows
    assert grid.keep(rows, owner="orders") == []
    assert grid.keep(rows, cluster="b:9092") == rows and grid.keep(rows, cluster="x") == []
    assert grid.keep(rows, status="no_run") == rows and grid.keep(rows, status="red") == []
