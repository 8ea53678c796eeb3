"""bench/fleet.py: the fleet's flows, and each window's verdict time measured from its closing."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench import fleet
from kafka_recon.config import load_flows

pytestmark = pytest.mark.unit

WINDOW = timedelta(minutes=5)
CLOSING = fleet.GRACE + fleet.DISORDER


def test_the_flows_rates_spread_their_windows_from_the_least_to_the_most_records() -> None:
    got = [r * WINDOW.total_seconds() for r in fleet.rates(4, WINDOW, 10_000, 100_000)]
    assert got == pytest.approx([10_000, 40_000, 70_000, 100_000])


def test_every_flow_of_the_fleet_is_in_one_valid_flow_config(tmp_path: Path) -> None:
    feeds = [{"name": f"fleet{k:02d}", "topic": f"t{k}", "upstream": str(tmp_path / f"{k}.db"),
              "sink_table": f"dst_{k}", "rate": 1.0} for k in range(3)]
    config = tmp_path / "flows.yaml"
    config.write_text(fleet.flows_yaml(feeds, WINDOW, "127.0.0.1:9",
                                       "postgresql://postgres@127.0.0.1:5/fleet_sinks"))
    flows = load_flows(config)
    assert sorted(flows) == ["fleet00", "fleet01", "fleet02"]
    assert {f.window for f in flows.values()} == {WINDOW}
    assert [flows[n].topic_tier.topic for n in sorted(flows)] == ["t0", "t1", "t2"]
    # every flow's sink is its own table of the one sink database, loaded by one group
    assert [flows[n].tiers[2].ids.split(" FROM ")[1].split()[0] for n in sorted(flows)] == [
        "dst_0", "dst_1", "dst_2"]
    assert {tuple(flows[n].topic_tier.consumer_groups) for n in flows} == {("fleet-loader",)}


def _result(root: Path, flow: str, end: datetime, status: str, written: datetime) -> None:
    start = end - WINDOW
    folder = root / flow / f"{start:%Y-%m-%dT%H%M%SZ}_{end:%Y-%m-%dT%H%M%SZ}"
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps(
        {"status": status, "reasons": [], "tiers": [{"count": 12}]}))
    os.utime(folder / "result.json", (written.timestamp(), written.timestamp()))


def test_each_closed_window_is_timed_from_its_closing_and_one_without_a_verdict_is_skipped(
        tmp_path: Path) -> None:
    t0 = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
    # the windows ending 12:00, 12:05 and 12:10 close (40 s later) inside [12:00, 12:14];
    # 12:20's closes after
    _result(tmp_path, "a", t0 + WINDOW, "ok", t0 + WINDOW + CLOSING + timedelta(seconds=30))
    _result(tmp_path, "a", t0 + 2 * WINDOW, "findings", t0 + 2 * WINDOW + CLOSING
            + timedelta(seconds=95))
    _result(tmp_path, "a", t0 + 4 * WINDOW, "ok", t0 + 4 * WINDOW + CLOSING)
    rows = fleet.verdicts(tmp_path, ["a"], WINDOW, t0, t0 + timedelta(minutes=14))
    assert [(r["window"], r["verdict"], r["after_closing_s"]) for r in rows] == [
        ("2026-11-27T11:55:00Z", None, None), ("2026-11-27T12:00:00Z", "ok", 30.0),
        ("2026-11-27T12:05:00Z", "findings", 95.0)]
    s = fleet.summary(rows, 1, WINDOW, 14, t0)
    assert (s["windows"], s["skipped"], s["not_ok"]) == (3, 1, 1)
    assert s["verdict_after_grace_s"] == {"p50": 62.5, "p95": 95.0, "max": 95.0}


def test_the_fleet_is_warm_once_every_flow_has_a_verdict_of_some_window(tmp_path: Path) -> None:
    t0 = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
    assert not fleet.warmed(tmp_path, ["a", "b"])
    _result(tmp_path, "a", t0, "ok", t0)
    (tmp_path / "b" / "2026-11-27T115500Z_2026-11-27T120000Z").mkdir(parents=True)  # under way
    assert not fleet.warmed(tmp_path, ["a", "b"])
    _result(tmp_path, "b", t0 + WINDOW, "findings", t0 + WINDOW)  # its first run, a window on
    assert fleet.warmed(tmp_path, ["a", "b"])


def test_the_95th_percentile_is_a_measured_value_by_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert fleet.percentile(values, 95) == 95.0
    assert fleet.percentile([3.0], 95) == 3.0
    assert fleet.percentile([1.0, 2.0], 95) == 2.0


def test_the_task_timeline_is_each_tasks_median_times_after_its_windows_closing() -> None:
    closed = [datetime(2026, 11, 28, 5, 30, 40, tzinfo=UTC),
              datetime(2026, 11, 28, 5, 35, 40, tzinfo=UTC),
              datetime(2026, 11, 28, 5, 40, 40, tzinfo=UTC)]

    def ti(task: str, at: datetime, queued: float | None, start: float | None,
           end: float | None) -> dict[str, object]:
        def iso(s: float | None) -> str | None:
            return None if s is None else (at + timedelta(seconds=s)).isoformat().replace(
                "+00:00", "Z")
        return {"task_id": task, "queued_when": iso(queued), "start_date": iso(start),
                "end_date": iso(end)}

    runs = [(c, [ti("stage_topic", c, 40 + k, 41 + k, 50 + 2 * k),
                 ti("begin", c, 5, 6 + k, 20),
                 # the third window's Spark step never started: no start or end of it counts
                 ti("replay_reconcile", c, 100 * (k + 1), None if k == 2 else 120 * (k + 1),
                    None if k == 2 else 160 * (k + 1))])
            for k, c in enumerate(closed)]
    got = fleet.timeline(runs)
    assert list(got) == ["begin", "stage_topic", "replay_reconcile"]  # by median start
    assert got["begin"] == {"queued_when": 5, "start_date": 7, "end_date": 20}
    assert got["stage_topic"] == {"queued_when": 41, "start_date": 42, "end_date": 52}
    assert got["replay_reconcile"] == {"queued_when": 200, "start_date": 180, "end_date": 240}


def test_the_feeders_health_is_read_from_its_statistics_in_the_measured_minutes(
        tmp_path: Path) -> None:
    t0 = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)

    def line(at: datetime, tick: float, wait: float, retries: int) -> str:
        return json.dumps({"at": int(at.timestamp()), "tick_max_s": tick, "wait_max_s": wait,
                           "rtt_max_s": 0.01, "retries": retries, "timeouts": 0})

    stats = tmp_path / "producer.jsonl"
    stats.write_text("\n".join([
        line(t0 - timedelta(minutes=1), 110.0, 9.0, 0),  # before the measured minutes
        line(t0, 0.2, 0.1, 5), line(t0 + timedelta(minutes=5), 1.4, 0.3, 7),
        line(t0 + timedelta(minutes=11), 50.0, 50.0, 9)]) + "\n")  # after them
    assert fleet.feeder_health(stats, t0, t0 + timedelta(minutes=10)) == {
        "samples": 2, "tick_max_s": 1.4, "producer_wait_max_s": 0.3, "broker_rtt_max_s": 0.01,
        "retries": 2, "timeouts": 0}
    assert fleet.feeder_health(tmp_path / "none.jsonl", t0, t0) == {"samples": 0}
