from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kafka_recon.config import FlumeTier
from kafka_recon.sources.flume import FlumeError, Snapshot, bracket, growth, parse_metrics

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 20, tzinfo=UTC)


def snap(minutes: int, start: int, accepted: int) -> Snapshot:
    return Snapshot(T0 + timedelta(minutes=minutes), start, accepted, start, accepted)


def test_growth_is_the_counter_difference_without_restart() -> None:
    assert growth([snap(0, 1, 10), snap(5, 1, 25), snap(10, 1, 40)],
                  "source_accepted", "source_start") == (30, 0)


def test_a_restart_counts_the_new_process_from_zero_not_negative() -> None:
    total, restarts = growth([snap(0, 1, 100), snap(5, 2, 7), snap(10, 2, 12)],
                             "source_accepted", "source_start")
    assert (total, restarts) == (12, 1)


def test_a_counter_that_went_down_without_new_start_time_is_a_restart_too() -> None:
    assert growth([snap(0, 1, 50), snap(5, 1, 3)], "source_accepted", "source_start") == (3, 1)


def test_bracket_needs_a_snapshot_on_each_side() -> None:
    snaps = [snap(0, 1, 0), snap(30, 1, 5), snap(90, 1, 9)]
    chain = bracket(snaps, T0 + timedelta(minutes=10), T0 + timedelta(minutes=60))
    assert chain is not None
    assert [(s.taken_at - T0) // timedelta(minutes=1) for s in chain] == [0, 30, 90]
    assert bracket(snaps, T0 + timedelta(minutes=10), T0 + timedelta(minutes=120)) is None


def test_missing_component_names_what_the_agent_has() -> None:
    tier = FlumeTier(name="c", type="flume", metrics_url="http://x/metrics", source="r1",
                     sink="k1")
    with pytest.raises(FlumeError, match=r"SINK.k1.StartTime missing .* \(components: SOURCE.r1\)"):
        parse_metrics(tier, {"SOURCE.r1": {"StartTime": "1", "EventAcceptedCount": "2"}}, T0)


def test_unreachable_agent_names_its_url() -> None:
    from harness.services.ports import free_port
    from kafka_recon.sources.flume import fetch_metrics

    port = free_port()
    tier = FlumeTier(name="c", type="flume", metrics_url=f"http://127.0.0.1:{port}/metrics",
                     source="r1", sink="k1")
    with pytest.raises(FlumeError, match=rf"tier 'c': Flume metrics at "
                                         rf"http://127.0.0.1:{port}/metrics cannot be read"):
        fetch_metrics(tier)


def _stage(snaps: list[Snapshot], start: datetime, hours: int, tmp_path: Any) -> dict[str, Any]:
    from kafka_recon.config import Flow
    from kafka_recon.sources.flume import stage_flume_tier
    from kafka_recon.stores.snapshots import connect, flume_snapshots, keep_flume
    from kafka_recon.window import Window

    store = tmp_path / "flume.db"
    eng = connect(store)
    for s in snaps:
        keep_flume(eng, "f", "c", s.taken_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), s, "{}")
    flow = Flow.model_validate({
        "name": "f", "owners": ["o@example.com"], "record": {"id": "$.id", "event_time": "$.t"},
        "tiers": [{"name": "c", "type": "flume", "metrics_url": "http://x", "source": "r",
                   "sink": "k"}, {"name": "t", "type": "kafka", "bootstrap": "x:1",
                                  "topic": "t"}]})
    tier = flow.tiers[0]
    assert isinstance(tier, FlumeTier)
    [source, _] = stage_flume_tier(flow, tier, Window(start, start + timedelta(hours=hours)),
                                   flume_snapshots("f", "c", store))
    return source.as_json()


def test_each_interval_between_snapshots_counts_in_exactly_one_hourly_bucket(
        tmp_path: Any) -> None:
    # a snapshot every 7 minutes (never on an hour), 60 events a minute, for a whole day
    snaps = [snap(m, 1, 60 * m) for m in range(0, 24 * 60 + 8, 7)]
    day = _stage(snaps, T0, 24, tmp_path)
    # the day counts the growth from the last snapshot at or before 00:00 to the last at or
    # before 24:00, once: nothing twice at the 23 inner hour boundaries
    last = [s for s in snaps if s.taken_at <= T0 + timedelta(hours=24)][-1]
    assert day["count"] == last.source_accepted == sum(day["buckets"].values())
    assert len(day["buckets"]) == 24
    assert all(3360 <= n <= 3780 for n in day["buckets"].values()), day["buckets"]
    # consecutive windows add up to the counters' growth over both
    am, pm = (_stage(snaps, T0 + timedelta(hours=h), 12, tmp_path / str(h)) for h in (0, 12))
    assert am["count"] + pm["count"] == day["count"]


def test_an_interval_ending_at_the_window_start_is_the_previous_windows(tmp_path: Any) -> None:
    snaps = [snap(0, 1, 0), snap(60, 1, 100), snap(90, 1, 130), snap(120, 1, 200)]
    [first, second] = (_stage(snaps, T0 + timedelta(hours=h), 1, tmp_path / str(h))
                       for h in (0, 1))
    assert (first["count"], second["count"]) == (100, 100)
