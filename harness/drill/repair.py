"""The drill's repairs: a scenario's window, once judged, repaired as its owner would repair it.

Airflow runs here as deployed (api-server, scheduler, dag-processor, triggerer; LocalExecutor;
spark-submit), reading the attempt's flow config and run folders. For a scenario marked
`repair`:

1. `recon_repair` is triggered through the REST API and its plan approved there, as the
   Required Actions page answers; the delivery (a spark-submit) is SIGKILLed as soon as its
   first records reach the repair topic, transactions open or committed.
2. It is triggered and approved again: the plan is the same (same digest), the delivery sends
   only what the killed one did not commit, the sink's loader (one more consumer app of the
   drill, reading the repair topic read_committed, committing after its writes) loads it, and
   the DAG's `verify` reconciles the window again.
3. Passes when that re-run is ok, the sink holds each lost id exactly once, and a third trigger
   has nothing left to plan.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from harness.drill.faults import wait_for
from harness.services.airflow import AirflowServers, airflow_env
from harness.services.postgres import PostgresServer
from harness.services.smtp import MailCatcher

DAG = "recon_repair"
# the flow's repair settings: write-side rows published as JSON; the sink's loader gets 20 s
REPAIR_BLOCK = "    repair: {write_side: publish, settle: 20s}\n"


class Desk:
    """Airflow for the drill's repairs, started on first use and kept for the drill."""

    def __init__(self, out: Path) -> None:
        self.base = out / "repair-desk"
        self.config = self.base / "flows.yaml"  # the attempt's config, copied here
        self.runs = self.base / "runs"
        self.services: list[Any] = []
        self.airflow: AirflowServers | None = None
        self.token = ""

    def start(self, config: Path) -> Desk:
        self.base.mkdir(parents=True, exist_ok=True)
        shutil.copy(config, self.config)  # the DAG file reads it when it is parsed
        if self.airflow is not None:
            return self
        pg = PostgresServer(self.base / "pg").start()
        self.services.append(pg)
        mail = MailCatcher(self.base / "mail").start()
        self.services.append(mail)
        env = airflow_env(self.base / "airflow", smtp_port=mail.port, extra={
            "KAFKA_RECON_CONFIG": str(self.config), "KAFKA_RECON_OUT": str(self.runs)})
        self.airflow = AirflowServers(self.base / "airflow", env,
                                      database_url=pg.create_database("airflow")).start()
        self.services.append(self.airflow)
        self.airflow.unpause(DAG)
        self.airflow.unpause("recon_adhoc")  # the repair's verification runs through it
        self.token = self.airflow.token()
        return self

    def stop(self) -> None:
        for s in reversed(self.services):
            s.stop()
        self.services.clear()
        self.airflow = None

    def folder(self, flow: str, start: str, end: str, config: Path | None = None) -> Path:
        """The window's run folder, where Airflow's tasks find it (KAFKA_RECON_OUT)."""
        from kafka_recon.config import load_flow
        from kafka_recon.runfolder import window_folder_name
        from kafka_recon.window import Window

        grace = load_flow(config or self.config, flow).longest_grace
        return self.runs / flow / window_folder_name(Window.parse(start, end, grace))

    def api(self, method: str, path: str, body: Any = None) -> Any:
        assert self.airflow is not None
        code, got = self.airflow.api(method, path, body, token=self.token)
        if code not in (200, 201):
            raise RuntimeError(f"{method} {path}: {code} {got}")
        return got

    def trigger(self, flow: str, start: str, end: str) -> str:
        run = self.api("POST", f"/dags/{DAG}/dagRuns",
                       {"logical_date": None, "conf": {"flow": flow, "start": start,
                                                      "end": end}})
        return str(run["dag_run_id"])

    def state(self, run_id: str, task: str | None = None) -> str:
        path = f"/dags/{DAG}/dagRuns/{run_id}" + (f"/taskInstances/{task}" if task else "")
        return str(self.api("GET", path)["state"])

    def approve(self, run_id: str) -> None:
        """Approve the plan once the approval waits, as the Required Actions page does."""
        assert self.airflow is not None
        detail = f"/dags/{DAG}/dagRuns/{run_id}/taskInstances/approve/-1/hitlDetails"

        def waiting() -> bool:
            code, got = self.airflow.api("GET", detail, token=self.token)  # type: ignore[union-attr]
            if self.state(run_id) == "failed":
                raise RuntimeError(f"{DAG} {run_id} failed before its approval")
            return code == 200 and got.get("response_received") is False \
                and self.state(run_id, "approve") == "awaiting_input"

        wait_for("the repair's approval waiting", waiting, 600)
        # answered as a person would: after the parked task's process has ended
        self.airflow.parked(DAG, run_id, "approve")
        self.api("PATCH", detail, {"chosen_options": ["Approve"]})

    def finished(self, run_id: str, timeout: float = 900) -> str:
        return str(wait_for(f"{DAG} {run_id} finished",
                            lambda: (s := self.state(run_id)) in ("success", "failed") and s,
                            timeout))


def _committed(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    """The repair topic's committed records (read_committed), with their headers."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafka-recon-drill-repair-truth",
                  "enable.auto.commit": False, "isolation.level": "read_committed",
                  "enable.partition.eof": True, "log_level": 0})
    try:
        parts = c.list_topics(topic, timeout=15).topics[topic].partitions
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        out: list[dict[str, Any]] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + 60
        while len(at_end) < len(parts) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                at_end.add(int(m.partition() or 0))
                continue
            headers: list[tuple[str, bytes]] = list(m.headers() or [])  # type: ignore[arg-type]
            out.append({k: bytes(v).decode() for k, v in headers})
        return out
    finally:
        c.close()


def _kill_at_first_write(bootstrap: str, topic: str, timeout: float = 600) -> int:
    """Watch the repair topic's log (high watermarks: records written, committed or not) and
    SIGKILL the delivery's spark-submit at its first record; the records then in the log."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafka-recon-drill-repair-hw",
                  "log_level": 0})
    try:
        deadline = time.monotonic() + timeout
        parts: list[int] = []
        while time.monotonic() < deadline:
            if not parts:  # the delivery creates the topic
                md = c.list_topics(timeout=5).topics.get(topic)
                parts = sorted(md.partitions) if md is not None and md.error is None else []
                time.sleep(0.05)
                continue
            written = sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=5,
                                                  cached=False)[1] for p in parts)
            if written:
                _kill_delivery()
                return int(written)
            time.sleep(0.02)
        raise RuntimeError(f"no record reached {topic} in {timeout:.0f}s")
    finally:
        c.close()


def _kill_delivery() -> int:
    """SIGKILL the delivery's spark-submit (its JVM and Python driver); how many died."""
    done = subprocess.run(["pkill", "-9", "-f", "jobs/repair_deliver.py"], check=False)
    return 0 if done.returncode else 1


def repair_window(desk: Desk, ctx: Any, config: Path, flow: str, start: str, end: str,
                  lost: set[int]) -> dict[str, Any]:
    """Repair the judged window through Airflow; what happened, and what did not hold."""
    from harness.drill.truth import sql_ids

    desk.start(config)
    repair_topic = f"{ctx.topic}.kafka-recon-repair"
    loader = ctx.consumer(name="repair-loader", topic=repair_topic,
                          group=f"{ctx.group}-repair", commit="after",
                          config={"isolation.level": "read_committed",
                                  "topic.metadata.refresh.interval.ms": 1000})
    notes: list[str] = []
    problems: list[str] = []
    try:
        first = desk.trigger(flow, start, end)
        desk.approve(first)
        notes.append(f"plan approved through the REST API ({first})")
        written = _kill_at_first_write(ctx.bootstrap, repair_topic)
        killed_at = len(_committed(ctx.bootstrap, repair_topic))
        notes.append(f"delivery SIGKILLed once the repair topic's log held {written} "
                     f"record(s); {killed_at} of the {len(lost)} planned had been committed "
                     "when it died")
        if desk.finished(first) != "failed" or killed_at >= len(lost):
            # the kill came after the delivery had committed everything: not mid-way
            return {"notes": notes, "problems": [], "repaired": len(lost), "bitten": False}
        second = desk.trigger(flow, start, end)
        desk.approve(second)
        notes.append(f"approved again ({second})")
        ended = desk.finished(second)
        delivery = _delivery(desk, flow, start, end)
        notes.append(f"the resumed delivery: {delivery}")
        if ended != "success":
            problems.append(f"the resumed repair ended {ended} (verify: "
                            f"{desk.state(second, 'verify')})")
        sent = [h for h in _committed(ctx.bootstrap, repair_topic) if h.get("kafka-recon-flow")]
        if len(sent) != len(lost):
            problems.append(f"the repair topic holds {len(sent)} record(s), {len(lost)} lost")
        third = desk.trigger(flow, start, end)
        if desk.finished(third) != "failed" or desk.state(third, "repair_plan") != "failed":
            problems.append("a third repair found something left to plan")
        else:
            notes.append("a third trigger: nothing left to plan (its plan step refused)")
    finally:
        loader.stop(10)
    sink = sql_ids(str(ctx.sinks["sink"]), "dst", _parse(start), _parse(end))
    twice = sorted(i for i in lost if sink.get(i, 0) > 1)
    missing = sorted(i for i in lost if sink.get(i, 0) == 0)
    if twice or missing:
        problems.append(f"in the sink after the repair: {len(missing)} lost id(s) still "
                        f"missing, {len(twice)} twice")
    result = _result(desk, flow, start, end)
    notes.append(f"re-run status {result.get('status')}")
    if result.get("status") != "ok":
        problems.append(f"the re-run's status is {result.get('status')}")
    return {"notes": notes, "problems": problems, "repaired": len(lost), "bitten": True}


def _parse(text: str) -> Any:
    from datetime import datetime

    return datetime.fromisoformat(text)


def _delivery(desk: Desk, flow: str, start: str, end: str) -> str:
    import json

    path = desk.folder(flow, start, end) / "repair" / "delivery.json"
    if not path.exists():
        return "no delivery.json"
    d = json.loads(path.read_text())
    return "; ".join(f"{h['hop']}: {h['sent']} sent, {h['already']} already there"
                     for h in d["hops"])


def _result(desk: Desk, flow: str, start: str, end: str) -> dict[str, Any]:
    import json

    path = desk.folder(flow, start, end) / "result.json"
    return json.loads(path.read_text()) if path.exists() else {}
