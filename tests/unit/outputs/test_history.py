"""The result history: replace-on-rerun, the volume band, the views the plugin page reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from kafka_recon.config import Flow
from kafka_recon.outputs import history
from kafka_recon.result.model import Result
from tests.factories import finding, hop, hours, tier
from tests.factories import result as make_result

pytestmark = pytest.mark.unit

DAY = datetime(2026, 11, 20, tzinfo=UTC)


def result(start: datetime, topic_per_hour: int, missing: int = 0, status: str = "ok",
           flow: str = "clicks", findings: list[Any] | None = None) -> Result:
    day = hours(start)
    return make_result(
        flow, start, status=status,
        tiers=[tier("clicks_topic", 24 * topic_per_hour,
                    buckets={h: topic_per_hour for h in day}),
               tier("lake", 24 * topic_per_hour - missing,
                    buckets={h: topic_per_hour - (missing if i == 0 else 0)
                             for i, h in enumerate(day)})],
        hops=[hop("clicks_topic", "lake", "consume", 24 * topic_per_hour,
                  24 * topic_per_hour - missing, missing=missing,
                  buckets=[{"bucket": h, "expected": topic_per_hour,
                            "observed": topic_per_hour - (missing if i == 0 else 0),
                            "missing": missing if i == 0 else 0} for i, h in enumerate(day)])],
        findings=(findings or []) + (
            [finding("loss", "consume", "clicks_topic->lake", missing)] if missing else []),
        reasons=[] if status != "inconclusive" else ["the window plus grace is open"])


@pytest.fixture
def eng(tmp_path: Path) -> Any:
    return history.engine(f"sqlite:///{tmp_path / 'h.db'}")


def _count(eng: Any, table: Any) -> int:
    from sqlalchemy import func, select

    with eng.connect() as con:
        return int(con.execute(select(func.count()).select_from(table)).scalar())


def test_recording_a_window_again_replaces_its_rows(eng: Any) -> None:
    assert history.record(result(DAY, 10, missing=3, status="findings"), "/r/1", eng=eng) == {
        "runs": 1, "tier_buckets": 48, "hop_buckets": 24, "findings": 1}
    history.record(result(DAY, 10), "/r/1", eng=eng)  # the re-run found nothing lost
    assert (_count(eng, history.runs), _count(eng, history.tier_buckets),
            _count(eng, history.hop_buckets), _count(eng, history.findings_table)) == (
        1, 48, 24, 0)
    [row] = history.flow_runs("clicks", eng=eng)
    assert row["status"] == "ok" and row["missing"] == 0
    history.record(result(DAY + timedelta(days=1), 10), "/r/2", eng=eng)
    assert _count(eng, history.runs) == 2


def test_flow_runs_sum_missing_and_records_per_tier(eng: Any) -> None:
    history.record(result(DAY, 10, missing=4, status="findings"), "/r", eng=eng)
    [row] = history.flow_runs("clicks", eng=eng)
    assert row["missing"] == 4 and row["findings"] == 1
    assert row["tiers"] == {"clicks_topic": 240, "lake": 236}
    assert row["window_start"] == "2026-11-20T00:00:00Z"
    assert "4 record(s) lost on the consume side" in row["summary"]


def test_latest_per_flow_is_the_newest_window_of_each_flow(eng: Any) -> None:
    history.record(result(DAY, 10, flow="a"), "/r", eng=eng)
    history.record(result(DAY + timedelta(days=1), 10, missing=1, status="findings", flow="a"),
                   "/r", eng=eng)
    history.record(result(DAY, 10, flow="b"), "/r", eng=eng)
    latest = {r["flow"]: (r["window_start"], r["status"])
              for r in history.latest_per_flow(eng=eng)}
    assert latest == {"a": ("2026-11-21T00:00:00Z", "findings"),
                      "b": ("2026-11-20T00:00:00Z", "ok")}


def _flow(**volume: Any) -> Flow:
    return Flow.model_validate({
        "name": "clicks", "owners": ["a@example.com"], "volume": volume,
        "record": {"id": "key", "event_time": "kafka_timestamp"},
        "tiers": [{"name": "clicks_topic", "type": "kafka", "bootstrap": "x:1", "topic": "c"},
                  {"name": "lake", "type": "sql", "conn": "db",
                   "ids": "SELECT id FROM t WHERE ts >= :start AND ts < :end"}]})


def test_volume_band_is_the_median_of_the_same_weekday_widened_each_way(eng: Any) -> None:
    for weeks, per_hour in ((1, 100), (2, 90), (3, 110), (4, 500)):
        history.record(result(DAY - timedelta(weeks=weeks), per_hour), "/r", eng=eng)
    history.record(result(DAY - timedelta(days=1), 1), "/r", eng=eng)  # another weekday
    band = history.volume_band(_flow(weeks=4, band=0.25), "clicks_topic", DAY,
                               DAY + timedelta(days=1), eng).as_json()
    assert band["history"] == [2400, 2160, 2640, 12000]
    assert band["median"] == 2520 and (band["min"], band["max"]) == (1890, 3150)
    assert band["note"] is None


def test_volume_band_needs_enough_history_and_ignores_inconclusive_windows(eng: Any) -> None:
    history.record(result(DAY - timedelta(weeks=1), 100), "/r", eng=eng)
    history.record(result(DAY - timedelta(weeks=2), 100, status="inconclusive"), "/r", eng=eng)
    band = history.volume_band(_flow(min_history=2), "clicks_topic", DAY,
                               DAY + timedelta(days=1), eng).as_json()
    assert band["min"] is None and band["history"] == [2400]
    assert band["note"] == ("volume band not checked: 1 of the 2 same-weekday windows it needs "
                            "are recorded")


def test_late_records_and_audit_risks_are_not_counted_as_findings(eng: Any) -> None:
    late = result(DAY, 10, findings=[
        finding("late", "write", "db->clicks_topic", 4),
        finding("config_risk", "write", "clicks_topic", 1, rule="T1-replication",
                severity="high")])
    history.record(late, "/r", eng=eng)
    [row] = history.flow_runs("clicks", eng=eng)
    assert (row["status"], row["findings"]) == ("ok", 0)
