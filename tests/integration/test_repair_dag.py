"""`recon_repair` under Airflow's own scheduler (api-server, scheduler, dag-processor and
triggerer; LocalExecutor; spark-submit): triggered through the REST API for a window whose sink
lost records, it plans, shows the plan to a person and waits. Answered through the REST API as
the Required Actions page answers: a rejection writes nothing (no repair topic, no delivery)
and Airflow records who rejected; an approval publishes exactly the lost records, once, to the
repair topic, with the plan the approver saw. The sink team's consumer (a thread of this test,
as docs/repair.md describes it) loads the repair topic into the sink; after the flow's settle
time the DAG reconciles the window again, which is now whole, and its report shows each hop
before and after."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from harness.services.airflow import AirflowServers, airflow_env
from harness.services.kafka import KafkaCluster
from harness.services.smtp import MailCatcher
from kafka_recon import orchestrate
from tests.integration.engine_harness import END, START, Scenario
from tests.integration.test_repair_plan import _repair_topic_records

pytestmark = pytest.mark.integration

DAG = "recon_repair"
CHROMIUM = "/usr/bin/chromium"
LOST = {4, 11}


class Stack:
    def __init__(self, airflow: AirflowServers, scn: Scenario, out: Path) -> None:
        self.airflow, self.scn, self.out = airflow, scn, out
        self.token = airflow.token()

    def api(self, method: str, path: str, body: Any = None) -> Any:
        code, got = self.airflow.api(method, path, body, token=self.token)
        assert code in (200, 201), (method, path, code, got)
        return got

    def trigger(self) -> str:
        run = self.api("POST", f"/dags/{DAG}/dagRuns", {
            "logical_date": None, "conf": {"flow": "f", "start": START.isoformat(),
                                           "end": END.isoformat()}})
        return str(run["dag_run_id"])

    def task(self, run_id: str, task_id: str) -> dict[str, Any]:
        return dict(self.api("GET", f"/dags/{DAG}/dagRuns/{run_id}/taskInstances/{task_id}"))

    def awaiting(self, run_id: str, timeout: float = 420) -> dict[str, Any]:
        """The approval's detail once the task waits for a person."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code, got = self.airflow.api(
                "GET", f"/dags/{DAG}/dagRuns/{run_id}/taskInstances/approve/-1/hitlDetails",
                token=self.token)
            if code == 200 and got.get("response_received") is False \
                    and self.task(run_id, "approve")["state"] == "awaiting_input":
                # answered as a person would: after the parked task's process has ended
                self.airflow.parked(DAG, run_id, "approve")
                return dict(got)
            states = {t: self.task(run_id, t)["state"] for t in ("repair_plan", "approve")}
            assert "failed" not in states.values(), (states, self.logs(run_id))
            time.sleep(3)
        raise AssertionError(f"the approval never waited: {self.logs(run_id)}")

    def answer(self, run_id: str, option: str) -> dict[str, Any]:
        return dict(self.api("PATCH",
                             f"/dags/{DAG}/dagRuns/{run_id}/taskInstances/approve/-1/hitlDetails",
                             {"chosen_options": [option]}))

    def finished(self, run_id: str, timeout: float = 420) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.api("GET", f"/dags/{DAG}/dagRuns/{run_id}")["state"]
            if state in ("success", "failed"):
                return str(state)
            time.sleep(3)
        raise AssertionError(f"{run_id} did not finish: {self.logs(run_id)}")

    def logs(self, run_id: str) -> str:
        root = self.airflow.home / "logs"
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in root.rglob("*.log")
                         if run_id.replace(":", "") in str(p).replace(":", ""))[-8000:]


@pytest.fixture(scope="module")
def stack(kafka: KafkaCluster, postgres: Any, spark: Any,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    work = tmp_path_factory.mktemp("repair_dag")
    scn = Scenario(work, kafka.bootstrap)
    scn.config.write_text(scn.config.read_text().replace(
        "    replays: 2\n", "    replays: 2\n    repair: {settle: 20s}\n"))
    scn.flow_through(15, sink_lacks=LOST)
    out = work / "runs" / "f" / f"{START:%Y-%m-%dT%H%M%SZ}_{END:%Y-%m-%dT%H%M%SZ}"
    run = orchestrate.load("f", START.isoformat(), END.isoformat(), scn.config, out)
    assert orchestrate.execute(run, spark, with_report=False).status == "findings"
    mail = MailCatcher(work / "mail").start()
    servers = AirflowServers(
        work / "airflow",
        airflow_env(work / "airflow", smtp_port=mail.port, extra={
            "KAFKA_RECON_CONFIG": str(scn.config), "KAFKA_RECON_OUT": str(work / "runs")}),
        database_url=postgres.create_database("airflow_repair"))
    try:
        servers.start()
        servers.unpause(DAG)
        servers.unpause("recon_adhoc")  # the repair's verification runs through it
        yield Stack(servers, scn, out)
    finally:
        servers.stop()
        mail.stop()


def _screenshot(stack: Stack, run_id: str, target: Path) -> None:
    """The approval as its approver sees it: the task's Required Actions page."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            ctx = browser.new_context(viewport={"width": 1400, "height": 900})
            ctx.add_cookies([{"name": "_token", "value": stack.token,
                              "url": stack.airflow.url}])
            page = ctx.new_page()
            page.goto(f"{stack.airflow.url}/dags/{DAG}/runs/{run_id}/tasks/approve/"
                      "required_actions")
            page.get_by_text("Re-deliver the lost records").first.wait_for(timeout=60_000)
            page.get_by_role("button", name="Approve").first.wait_for(timeout=30_000)
            page.wait_for_timeout(1000)
            page.screenshot(path=str(target), full_page=True)
        finally:
            browser.close()
    assert target.read_bytes().startswith(b"\x89PNG")


def test_a_rejected_repair_writes_nothing_and_airflow_records_who_rejected(
        stack: Stack, kafka: KafkaCluster, artifacts_dir: Path) -> None:
    from confluent_kafka.admin import AdminClient

    run_id = stack.trigger()
    waiting = stack.awaiting(run_id)
    assert waiting["subject"].startswith("Re-deliver the lost records of f,")
    assert "**topic->sink** (consume side): 2 of 2 lost record(s)" in waiting["body"]
    if Path(CHROMIUM).exists() or os.environ.get("KAFKA_RECON_REQUIRE_CHROMIUM"):
        _screenshot(stack, run_id, artifacts_dir / "repair-approval.png")
    answered = stack.answer(run_id, "Reject")
    assert answered["chosen_options"] == ["Reject"]
    assert stack.finished(run_id) == "success"
    assert stack.task(run_id, "repair_deliver")["state"] == "skipped"
    detail = stack.api("GET", f"/dags/{DAG}/dagRuns/{run_id}/taskInstances/approve/-1/"
                              "hitlDetails")
    assert detail["responded_by_user"]["name"] == "admin"
    # nothing written: no repair topic, no delivery; the plan stays, for a later approval
    topics = AdminClient({"bootstrap.servers": kafka.bootstrap}).list_topics(timeout=10).topics
    assert f"{stack.scn.topic}.kafka-recon-repair" not in topics
    assert not (stack.out / "repair" / "delivery.json").exists()
    assert (stack.out / "repair" / "plan.json").exists()


def _sink_loader(scn: Scenario, topic: str, stop: threading.Event) -> None:
    """The sink team's consumer of the repair topic: each record's id and time into the sink,
    committed after the write (read_committed: only what a delivery committed)."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": scn.bootstrap, "group.id": "sink-repair-loader",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000,
                         "allow.auto.create.topics": False})
    consumer.subscribe([topic])
    try:
        while not stop.is_set():
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            value = json.loads(msg.value())
            scn.sink([(int(value["id"]), datetime.fromisoformat(value["ts"]))])
            consumer.commit(msg, asynchronous=False)
    finally:
        consumer.close()


def test_an_approved_repair_publishes_the_plan_the_approver_saw_once_and_is_verified(
        stack: Stack, kafka: KafkaCluster) -> None:
    target = f"{stack.scn.topic}.kafka-recon-repair"
    stop = threading.Event()
    loader = threading.Thread(target=_sink_loader, args=(stack.scn, target, stop), daemon=True)
    run_id = stack.trigger()
    stack.awaiting(run_id)
    shown = json.loads((stack.out / "repair" / "plan.json").read_text())["digest"]
    loader.start()
    try:
        stack.answer(run_id, "Approve")
        assert stack.finished(run_id, timeout=900) == "success", stack.logs(run_id)
    finally:
        stop.set()
        loader.join(30)
    delivery = json.loads((stack.out / "repair" / "delivery.json").read_text())
    assert delivery["plan_digest"] == shown
    got = _repair_topic_records(kafka.bootstrap, target)
    assert sorted(json.loads(r["value"])["id"] for r in got) == sorted(LOST)
    assert {r["headers"]["kafka-recon-plan"] for r in got} == {shown}

    # verified: the window reconciled again through recon_adhoc is whole, and says so
    verify = stack.task(run_id, "verify")
    assert verify["state"] == "success"
    result = json.loads((stack.out / "result.json").read_text())
    assert result["status"] == "ok", result.get("findings")
    text = (stack.out / "report.txt").read_text()
    assert f"2 sent to {target}, 0 there before; missing now: 0 (was 2)" in text, text
