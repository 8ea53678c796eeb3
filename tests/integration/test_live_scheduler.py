"""The way kafka-recon is deployed: Airflow's own scheduler runs a 2-minute flow's DAG while
its pipeline keeps writing (api-server, scheduler, dag-processor and triggerer, LocalExecutor,
a PostgreSQL metadata database; no `airflow dags test`, no backfill).

Each window's run starts at the window's end and waits, deferred in the triggerer, for the
window's closing time (end + grace 60s + disorder 10s); then counts. Two scheduled windows whose
records reached every tier end ok; the third window, whose sink lost three rows, fails at once
(no retry, though the shipped retries are on) and its mail names exactly those ids.
Every setting is the shipped default except the flow's window, grace and disorder.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from harness.live import LivePipeline, floor_to
from harness.services.airflow import AirflowServers, airflow_env
from harness.services.kafka import KafkaCluster
from harness.services.smtp import MailCatcher, read_maildir
from kafka_recon.window import iso_z

pytestmark = pytest.mark.integration

FLOW = "live"
DAG = f"recon__{FLOW}"
# 2 minutes: the shortest window whose run (about 90 s of Spark on a busy 2-core machine) ends
# before the next window's closes and its run starts; three windows take make test about 5
# minutes. Grace 60 s: the pipeline's rows reach the sink within seconds, and the test needs
# the time between the third window's end and its closing to take rows from its sink; and a
# closing time nearer than 20 s when the wait starts is waited for in the task, not deferred
# (kafka_recon.airflow.sensors.closing), while this test watches a deferral
WINDOW = timedelta(minutes=2)
CLOSING = timedelta(seconds=70)  # grace 60s + disorder 10s
LOST = 3


def _when(t: str) -> datetime:
    return datetime.fromisoformat(t.replace("Z", "+00:00"))


class Live:
    def __init__(self, work: Path, airflow: AirflowServers, pipeline: LivePipeline) -> None:
        self.work, self.airflow, self.pipeline = work, airflow, pipeline
        self.token = airflow.token()

    def api(self, path: str) -> Any:
        code, body = self.airflow.api("GET", path, token=self.token)
        assert code == 200, (path, body)
        return body

    def scheduled_runs(self) -> list[dict[str, Any]]:
        runs = self.api(f"/dags/{DAG}/dagRuns?limit=50")["dag_runs"]
        return sorted((r for r in runs if r["run_type"] == "scheduled"),
                      key=lambda r: r["data_interval_start"])

    def task(self, run_id: str, task_id: str) -> dict[str, Any]:
        return dict(self.api(f"/dags/{DAG}/dagRuns/{run_id}/taskInstances/{task_id}"))

    def result(self, run: dict[str, Any]) -> dict[str, Any]:
        start, end = _when(run["data_interval_start"]), _when(run["data_interval_end"])
        folder = f"{start:%Y-%m-%dT%H%M%SZ}_{end:%Y-%m-%dT%H%M%SZ}"
        return dict(json.loads((self.work / "runs" / FLOW / folder / "result.json")
                               .read_text()))


@pytest.fixture(scope="module")
def live(kafka: KafkaCluster, postgres: Any, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[Live]:
    work = tmp_path_factory.mktemp("live")
    mail = MailCatcher(work / "mail").start()
    pipeline = LivePipeline(work / "pipeline", kafka.bootstrap, topic="live_orders")
    config = work / "flows.yaml"
    config.write_text(pipeline.flow_yaml(FLOW, window="2m", grace="60s", disorder="10s"))
    servers = AirflowServers(
        work / "airflow",
        airflow_env(work / "airflow", smtp_port=mail.port, extra={
            "KAFKA_RECON_CONFIG": str(config), "KAFKA_RECON_OUT": str(work / "runs")}),
        database_url=postgres.create_database("airflow_live"))
    try:
        servers.start()
        # the window the scheduler runs first on unpausing (the latest that has ended) gets
        # rows of its own, as if the pipeline had run through it; then it runs without pause
        now = datetime.now(UTC)
        first = floor_to(now, WINDOW) - WINDOW
        pipeline.start(prefill=(first, first + WINDOW, 40))
        servers.unpause(DAG)
        yield Live(work, servers, pipeline)
    finally:
        servers.stop()
        pipeline.stop()
        mail.stop()


@pytest.fixture(scope="module")
def windows(live: Live) -> dict[str, Any]:
    """Three scheduled windows run to their end; the third one's sink loses rows between the
    window's end and its closing time. Returns the runs, the states each run's wait was seen
    in, and the lost ids."""
    deadline = time.monotonic() + 25 * 60
    seen: dict[str, set[str]] = {}
    lost: list[int] = []
    while True:
        runs = live.scheduled_runs()[:3]
        for r in runs:
            if r["state"] not in ("success", "failed"):
                state = live.task(r["dag_run_id"], "begin")["state"]
                seen.setdefault(r["dag_run_id"], set()).add(str(state))
        if len(runs) >= 2 and not lost:
            third_start = _when(runs[1]["data_interval_end"])
            third_end = third_start + WINDOW
            if datetime.now(UTC) >= third_end + timedelta(seconds=15):
                # the rows the sink holds for the third window by now; three of them go
                in_sink = live.pipeline.ids("dst", third_start, third_end)
                assert len(in_sink) > 10, f"the sink holds {len(in_sink)} rows of the window"
                lost = in_sink[1:1 + LOST * 7:7]
                live.pipeline.lose_in_sink(lost)
                assert datetime.now(UTC) < third_end + CLOSING, \
                    "the sink lost its rows after the window had closed: too late to count"
        if len(runs) == 3 and all(r["state"] in ("success", "failed") for r in runs):
            return {"runs": runs, "seen": seen, "lost": lost}
        assert time.monotonic() < deadline, (runs, seen, live.airflow.home)
        time.sleep(1)


def test_two_scheduled_windows_wait_deferred_for_their_closing_time_and_end_ok(
        live: Live, windows: dict[str, Any]) -> None:
    first, second, _ = windows["runs"]
    for run in (first, second):
        assert run["state"] == "success", run
        result = live.result(run)
        assert result["status"] == "ok", result["reasons"]
        start, end = _when(run["data_interval_start"]), _when(run["data_interval_end"])
        assert end - start == WINDOW
        upstream = len(live.pipeline.ids("src", start, end))
        assert upstream > 0
        # every record of the window in every tier: none missing, none extra
        assert {t["name"]: t["count"] for t in result["tiers"]} == {
            "orders_db": upstream, "orders_topic": upstream, "warehouse": upstream}
        wait = live.task(run["dag_run_id"], "begin")
        # the count began only after the closing time
        assert _when(wait["end_date"]) >= end + CLOSING
    # the window that was scheduled while the test watched waited in the triggerer
    assert "deferred" in windows["seen"][second["dag_run_id"]], windows["seen"]


def test_the_replays_wait_in_their_clusters_pool_which_the_scheduler_made_on_first_use(
        live: Live, windows: dict[str, Any]) -> None:
    replay = live.task(windows["runs"][0]["dag_run_id"], "replay_reconcile")
    pool = replay["pool"]
    assert pool.startswith("kafka_recon__") and replay["state"] == "success", replay
    made = live.api(f"/pools/{pool}")
    assert made["slots"] == 2, made  # KAFKA_RECON_REPLAY_SLOTS' default


def test_a_window_whose_sink_lost_rows_fails_at_once_and_mails_the_ids(
        live: Live, windows: dict[str, Any]) -> None:
    run = windows["runs"][2]
    assert run["state"] == "failed"
    result = live.result(run)
    assert result["status"] == "findings"
    [loss] = [f for f in result["findings"] if f["kind"] == "loss"]
    assert (loss["side"], loss["hop"], loss["count"]) == (
        "consume", "orders_topic->warehouse", LOST)
    # the shipped retries are on, yet a window's answer is not retried
    for task_id in ("validate", "verdict"):
        ti = live.task(run["dag_run_id"], task_id)
        assert (ti["state"], ti["try_number"]) == ("failed", 1), ti
        assert ti["max_tries"] >= 2, ti
    start, end = _when(run["data_interval_start"]), _when(run["data_interval_end"])
    subject = f"[kafka-recon] {FLOW} {iso_z(start)}..{iso_z(end)}: FINDINGS"
    [mail] = [m for m in read_maildir(live.work / "mail") if m["Subject"] == subject]
    [ids] = list(mail.iter_attachments())
    assert sorted(int(i) for i in ids.get_content().split()[1:]) == windows["lost"]
