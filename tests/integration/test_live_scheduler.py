"""The way kafka-recon is deployed: Airflow's own scheduler runs a 2-minute flow's DAG while
its pipeline keeps writing (api-server, scheduler, dag-processor and triggerer, LocalExecutor,
a PostgreSQL metadata database; no `airflow dags test`, no backfill).

Each window's run starts at the window's end and waits for the window's closing time (end +
grace 60s + disorder 10s); then counts. Two scheduled windows: the one the scheduler runs first
on unpausing, whose sink lost three rows, fails at once (no retry, though the shipped retries
are on) and its mail names exactly those ids; a later one, scheduled while the test watches,
waits deferred in the triggerer and ends ok with every record of the window in every tier.
Every setting is the shipped default except the flow's window, grace and disorder.

The same flow config holds two flows that are wrong, as a shared config does: one whose
tolerance is mistyped (an import error naming its field, no DAG) and one whose topic the
cluster does not have (each window inconclusive, naming it; the topic never created). Neither
touches the healthy flow's windows above, and the Reconciliation page shows the valid flows
and lists the invalid one apart.
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

pytestmark = pytest.mark.integration

FLOW = "live"
DAG = f"recon__{FLOW}"
# beside it in the flow config: a flow whose topic the cluster does not have (a rename), and a
# flow whose tolerance is mistyped
RENAMED, MISSING_TOPIC = "renamed", "live_orders_v2"
INVALID = "n_invalid"
# 2 minutes: the shortest window whose run (about 90 s of Spark on a busy 2-core machine) ends
# before the next window's closes and its run starts; the two windows take make test about 4
# minutes (a third, once watched here, cost two more and proved nothing the two do not).
# Grace 60 s: the pipeline's rows reach the sink within seconds; and a closing time nearer than
# 20 s when the wait starts is waited for in the task, not deferred
# (kafka_recon.airflow.sensors.closing), while this test watches a deferral
WINDOW = timedelta(minutes=2)
CLOSING = timedelta(seconds=70)  # grace 60s + disorder 10s
LOST = 3
PREFILLED = 40
# the pipeline starts at least this long before a window's end, so that the window scheduled
# while the test watches has rows of its own
WATCHED_FROM = timedelta(seconds=30)


def _lose_in_sink(pipeline: LivePipeline, start: datetime, end: datetime) -> list[int]:
    """Once the sink has loaded every prefilled row of [start, end), three of them go (a bad
    load): the window's consume-side loss, exactly these ids."""
    deadline = time.monotonic() + 120
    while len(in_sink := pipeline.ids("dst", start, end)) < PREFILLED:
        assert time.monotonic() < deadline, f"the sink holds {len(in_sink)} of {PREFILLED}"
        time.sleep(0.5)
    lost = in_sink[1:1 + LOST * 7:7]
    pipeline.lose_in_sink(lost)
    return lost


def _when(t: str) -> datetime:
    return datetime.fromisoformat(t.replace("Z", "+00:00"))


class Live:
    def __init__(self, work: Path, airflow: AirflowServers, pipeline: LivePipeline,
                 lost: dict[datetime, list[int]], watched: datetime) -> None:
        self.work, self.airflow, self.pipeline = work, airflow, pipeline
        self.lost = lost        # each prefilled window's start: the ids its sink lost
        self.watched = watched  # the start of the window scheduled while the test watches
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

    def result(self, run: dict[str, Any], flow: str = FLOW) -> dict[str, Any]:
        start, end = _when(run["data_interval_start"]), _when(run["data_interval_end"])
        folder = f"{start:%Y-%m-%dT%H%M%SZ}_{end:%Y-%m-%dT%H%M%SZ}"
        return dict(json.loads((self.work / "runs" / flow / folder / "result.json")
                               .read_text()))


@pytest.fixture(scope="module")
def live(kafka: KafkaCluster, postgres: Any, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[Live]:
    work = tmp_path_factory.mktemp("live")
    mail = MailCatcher(work / "mail").start()
    pipeline = LivePipeline(work / "pipeline", kafka.bootstrap, topic="live_orders")
    config = work / "flows.yaml"
    healthy = pipeline.flow_yaml(FLOW, window="2m", grace="60s", disorder="10s")
    renamed = healthy.split("flows:\n", 1)[1].replace(f"  {FLOW}:", f"  {RENAMED}:", 1) \
        .replace(f'topic: "{pipeline.topic}"', f'topic: "{MISSING_TOPIC}"')
    invalid = healthy.split("flows:\n", 1)[1].replace(f"  {FLOW}:", f"  {INVALID}:", 1) \
        .replace("    replays: 2\n", "    replays: 2\n    tolerance: {loss: 150%}\n")
    assert MISSING_TOPIC in renamed and "150%" in invalid
    config.write_text(healthy + renamed + invalid)
    servers = AirflowServers(
        work / "airflow",
        airflow_env(work / "airflow", smtp_port=mail.port, extra={
            "KAFKA_RECON_CONFIG": str(config), "KAFKA_RECON_OUT": str(work / "runs")}),
        database_url=postgres.create_database("airflow_live"))
    try:
        servers.start()
        # the window the scheduler runs first on unpausing is the latest that had ended when
        # the DAG was parsed (a boundary may have passed since); it and every window after it
        # that has ended get rows of their own, as if the pipeline had run through them, and
        # their sink loses three rows of each before they are counted. Then the pipeline runs
        # without pause, starting early enough in a window for it to have rows of its own.
        first = _first_window(servers)
        now = datetime.now(UTC)
        if (left := floor_to(now, WINDOW) + WINDOW - now) < WATCHED_FROM:
            time.sleep(left.total_seconds() + 1)
            now = datetime.now(UTC)
        watched = floor_to(now, WINDOW)
        assert first + WINDOW <= watched, (first, now)
        prefilled = [first + WINDOW * k for k in range((watched - first) // WINDOW)]
        pipeline.start(prefill=[(w, w + WINDOW, PREFILLED) for w in prefilled])
        lost = {w: _lose_in_sink(pipeline, w, w + WINDOW) for w in prefilled}
        servers.unpause(DAG)
        servers.unpause(f"recon__{RENAMED}")
        yield Live(work, servers, pipeline, lost, watched)
    finally:
        servers.stop()
        pipeline.stop()
        mail.stop()


def _first_window(servers: AirflowServers) -> datetime:
    """The start of the window the scheduler will run first on unpausing, once the
    dag-processor has parsed the DAG."""
    deadline = time.monotonic() + 180
    while True:
        code, body = servers.api("GET", f"/dags/{DAG}")
        if code == 200 and body.get("next_dagrun_data_interval_start"):
            return _when(body["next_dagrun_data_interval_start"])
        assert time.monotonic() < deadline, ("the DAG was not parsed", code, body)
        time.sleep(2)


@pytest.fixture(scope="module")
def windows(live: Live) -> dict[str, Any]:
    """The scheduled windows run to their end, up to the one scheduled while the test watched.
    Returns the first and the watched one's runs, and the states each run's wait was seen in."""
    deadline = time.monotonic() + 20 * 60
    seen: dict[str, set[str]] = {}
    while True:
        runs = live.scheduled_runs()
        for r in runs:
            if r["state"] not in ("success", "failed"):
                state = live.task(r["dag_run_id"], "begin")["state"]
                seen.setdefault(r["dag_run_id"], set()).add(str(state))
        upto = [r for r in runs if _when(r["data_interval_start"]) <= live.watched]
        if upto and _when(upto[-1]["data_interval_start"]) == live.watched \
                and all(r["state"] in ("success", "failed") for r in upto):
            return {"first": upto[0], "watched": upto[-1], "seen": seen}
        assert time.monotonic() < deadline, (runs, seen, live.airflow.home)
        time.sleep(1)


def test_a_window_scheduled_while_watched_waits_deferred_for_its_closing_time_and_ends_ok(
        live: Live, windows: dict[str, Any]) -> None:
    run = windows["watched"]
    assert run["state"] == "success", run
    result = live.result(run)
    assert result["status"] == "ok", result["reasons"]
    start, end = _when(run["data_interval_start"]), _when(run["data_interval_end"])
    assert end - start == WINDOW
    upstream = len(live.pipeline.ids("src", start, end))
    assert upstream > 0
    # every record of the window in every tier, written while it ran: none missing, none extra
    assert {t["name"]: t["count"] for t in result["tiers"]} == {
        "orders_db": upstream, "orders_topic": upstream, "warehouse": upstream}
    # it waited in the triggerer, and the count began only after the closing time
    assert "deferred" in windows["seen"][run["dag_run_id"]], windows["seen"]
    wait = live.task(run["dag_run_id"], "begin")
    assert _when(wait["end_date"]) >= end + CLOSING


def test_the_replays_wait_in_their_clusters_pool_which_the_scheduler_made_on_first_use(
        live: Live, windows: dict[str, Any]) -> None:
    for run in (windows["first"], windows["watched"]):
        replay = live.task(run["dag_run_id"], "replay_reconcile")
        pool = replay["pool"]
        assert pool.startswith("kafka_recon__") and replay["state"] == "success", replay
    made = live.api(f"/pools/{pool}")
    assert made["slots"] == 2, made  # KAFKA_RECON_REPLAY_SLOTS' default


def test_a_window_whose_sink_lost_rows_fails_at_once_and_mails_the_ids(
        live: Live, windows: dict[str, Any]) -> None:
    run = windows["first"]
    start = _when(run["data_interval_start"])
    assert start in live.lost, ("the first scheduled window was not prefilled", run)
    assert run["state"] == "failed"
    result = live.result(run)
    assert result["status"] == "findings"
    assert {t["name"]: t["count"] for t in result["tiers"]} == {
        "orders_db": PREFILLED, "orders_topic": PREFILLED, "warehouse": PREFILLED - LOST}
    [loss] = [f for f in result["findings"] if f["kind"] == "loss"]
    assert (loss["side"], loss["hop"], loss["count"]) == (
        "consume", "orders_topic->warehouse", LOST)
    wait = live.task(run["dag_run_id"], "begin")
    end = _when(run["data_interval_end"])
    assert _when(wait["end_date"]) >= end + CLOSING
    # the shipped retries are on, yet a window's answer is not retried
    for task_id in ("report", "verdict"):
        ti = live.task(run["dag_run_id"], task_id)
        assert (ti["state"], ti["try_number"]) == ("failed", 1), ti
        assert ti["max_tries"] >= 2, ti
    subject = (f"FINDINGS {FLOW}: {len(live.lost[start])} lost, "
               f"{start:%Y-%m-%d %H:%M}-{end:%H:%M} UTC")
    [mail] = [m for m in read_maildir(live.work / "mail") if m["Subject"] == subject]
    [ids] = list(mail.iter_attachments())
    assert sorted(int(i) for i in ids.get_content().split()[1:]) == live.lost[start]


def test_a_bad_flow_and_a_missing_topic_stay_their_own_flows_problems(
        live: Live, windows: dict[str, Any], kafka: KafkaCluster) -> None:
    """The healthy flow's windows above had their verdicts with these two beside it; here,
    what became of the two."""
    # the mistyped flow: an import error naming its field, and no DAG
    errors = live.api("/importErrors")["import_errors"]
    assert any(f"flow '{INVALID}'" in e["stack_trace"] and "field 'tolerance.loss'"
               in e["stack_trace"] for e in errors), errors
    assert live.airflow.api("GET", f"/dags/recon__{INVALID}")[0] == 404
    # the renamed topic: its windows end inconclusive, naming the topic; it is never created
    deadline = time.monotonic() + 6 * 60
    while not (done := [r for r in live.api(f"/dags/recon__{RENAMED}/dagRuns?limit=50")
                        ["dag_runs"] if r["state"] in ("success", "failed")]):
        assert time.monotonic() < deadline, "no window of the renamed flow ended"
        time.sleep(2)
    result = live.result(done[0], RENAMED)
    assert result["status"] == "inconclusive" and not result["findings"], result
    assert f"topic '{MISSING_TOPIC}' does not exist on the cluster" in result["reasons"][0]
    from confluent_kafka.admin import AdminClient

    assert MISSING_TOPIC not in AdminClient({"bootstrap.servers": kafka.bootstrap}) \
        .list_topics(timeout=15).topics
    # the page: every valid flow, and the invalid one apart with its field
    import urllib.request

    req = urllib.request.Request(f"{live.airflow.url}/recon/api/grid?span=24h",
                                 headers={"Authorization": f"Bearer {live.token}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        grid = json.loads(resp.read())
    assert grid["problem"] is None
    assert {f["flow"] for f in grid["flows"]} == {FLOW, RENAMED}
    # the renamed flow's cell says why, as its mail does
    [row] = [f for f in grid["flows"] if f["flow"] == RENAMED]
    assert any(f"topic '{MISSING_TOPIC}' does not exist" in said
               for said in row["said"].values()), row
    mails = [m for m in read_maildir(live.work / "mail")
             if m["Subject"].startswith(f"INCONCLUSIVE {RENAMED}")]
    assert mails and f"topic '{MISSING_TOPIC}' does not exist on the cluster" in \
        mails[0].get_body(("plain",)).get_content()
    [bad] = grid["invalid"]
    assert bad["flow"] == INVALID and bad["fields"][0][0] == "tolerance.loss", bad
