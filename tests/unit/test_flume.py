from __future__ import annotations

from datetime import UTC, datetime, timedelta

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
