"""`make bench-fleet`: many flows on short windows, run by Airflow's live scheduler.

Twenty flows (by default), each a pipeline that never pauses (an application writing orders
upstream and producing them to the flow's topic, a loader writing the topic into the flow's
sink table in PostgreSQL), all of them fed by one process (`bench.feeder`), so that feeding
costs less than what is measured; each flow at its own rate so that a window holds from 10,000
to 100,000 records. Every
flow's `recon__<flow>` DAG runs on 5-minute windows under Airflow's api-server, scheduler,
dag-processor and triggerer (LocalExecutor, PostgreSQL), all its Spark work through one warm
Spark Connect server (`KAFKA_RECON_SPARK_REMOTE`), every other setting the shipped default.

The measured minutes begin once every DAG's first run (the window before unpausing, all of them
at once: a start-up burst) has its verdict. Measured per window whose closing time (end + grace
+ disorder) falls inside the measured minutes: how long after its closing its verdict
(result.json) was written, and the verdict itself (nothing is lost in these pipelines, so every
window must be `ok`). A window with no verdict by the end (its run failed, or never ran) is
skipped. Writes bench/fleet.json, which bench.report reads for the fleet's target (p95 within
60 s for 20 flows, none skipped; 50 flows measured and reported).

    python -m bench.fleet [--flows 20] [--window-minutes 5] [--minutes 30]
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.cpu import CpuSampler
from harness.live import FLOW, floor_to
from harness.services.airflow import AirflowServers, airflow_env
from harness.services.kafka import KafkaCluster
from harness.services.postgres import PostgresServer
from harness.services.smtp import MailCatcher
from harness.services.spark import SparkConnect
from kafka_recon.runfolder import RunFolder
from kafka_recon.settings import REPO_ROOT, replay_slots
from kafka_recon.window import Window, iso_z, parse_instant

GRACE, DISORDER = timedelta(seconds=30), timedelta(seconds=10)


def rates(flows: int, window: timedelta, least: int, most: int) -> list[float]:
    """Rows per second of each flow: windows from `least` to `most` records, evenly spread."""
    span = [least + (most - least) * k / max(flows - 1, 1) for k in range(flows)]
    return [n / window.total_seconds() for n in span]


def flows_yaml(feeds: list[dict[str, Any]], window: timedelta, bootstrap: str, sink: str
               ) -> str:
    """One flow config holding every flow of the feeder's spec."""
    from bench.feeder import GROUP

    minutes = f"{int(window.total_seconds() // 60)}m"
    return "flows:\n" + "".join(
        FLOW.format(name=f["name"], owner="fleet@example.com", window=minutes,
                    grace=f"{int(GRACE.total_seconds())}s",
                    disorder=f"{int(DISORDER.total_seconds())}s", upstream=f["upstream"],
                    bootstrap=bootstrap, topic=f["topic"], group=GROUP,
                    producer="{acks: all, enable.idempotence: true}", sink=sink,
                    sink_table=f["sink_table"])
        for f in feeds)


def make_topics(bootstrap: str, topics: list[str], partitions: int = 3) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(t, partitions, 1) for t in topics]).values():
        fut.result(30)


def warmed(runs_root: Path, flows: list[str]) -> bool:
    """Whether every flow's first run has its verdict (whichever window the scheduler began
    with: the one before unpausing, or the next if a window closed while the fleet started)."""
    return all(any((runs_root / f).glob("*/result.json")) for f in flows)


def verdicts(runs_root: Path, flows: list[str], window: timedelta, since: datetime,
             until: datetime) -> list[dict[str, Any]]:
    """Every window of every flow whose closing time lies in [since, until]: its verdict and
    how long after closing it was written (None: no verdict, skipped)."""
    closing = GRACE + DISORDER
    first = floor_to(since - closing, window) + window  # the first end closing at or after since
    out = []
    for flow in flows:
        end = first
        while end + closing <= until:
            start = end - window
            result = RunFolder.of(runs_root, flow, Window(start, end)).result
            row: dict[str, Any] = {"flow": flow, "window": iso_z(start), "verdict": None,
                                   "after_closing_s": None}
            if result.exists():
                doc = json.loads(result.read_text())
                written = datetime.fromtimestamp(result.stat().st_mtime, UTC)
                row.update(verdict=doc["status"], reasons=doc.get("reasons") or [],
                           records=next((t["count"] for t in doc.get("tiers") or []), None),
                           after_closing_s=round((written - (end + closing)).total_seconds(), 1))
            out.append(row)
            end += window
    return out


def _at(text: str | None, what: str) -> datetime | None:
    """A time of Airflow's REST API, or None where it has none (a task never started)."""
    return parse_instant(text, what) if text else None


def task_timeline(servers: AirflowServers, flows: list[str], since: datetime,
                  until: datetime) -> dict[str, dict[str, float]]:
    """Where a window's time goes in Airflow: `timeline` of the flows' DAG runs whose window
    closed in [since, until], their task instances read from the REST API."""
    closing = GRACE + DISORDER
    runs: list[tuple[datetime, list[dict[str, Any]]]] = []
    for flow in flows:
        _, found = servers.api("GET", f"/dags/recon__{flow}/dagRuns?limit=200")
        for run in (found or {}).get("dag_runs", []):
            end = _at(run.get("data_interval_end"), f"{run['dag_run_id']} data_interval_end")
            if end is None or not since <= end + closing <= until:
                continue
            _, tis = servers.api("GET", f"/dags/recon__{flow}/dagRuns/{run['dag_run_id']}"
                                        "/taskInstances?limit=100")
            runs.append((end + closing, (tis or {}).get("task_instances", [])))
    return timeline(runs)


def timeline(runs: list[tuple[datetime, list[dict[str, Any]]]]) -> dict[str, dict[str, float]]:
    """Per task, the medians (seconds) of when it was queued, started and ended, counted from
    its window's closing (end + grace + disorder), given each run's closing and its task
    instances as the REST API gives them; tasks in the order of their median start. A time a
    task instance does not have (never queued, never started) is left out of its median."""
    marks: dict[str, dict[str, list[float]]] = {}
    for closed, tis in runs:
        for ti in tis:
            for what in ("queued_when", "start_date", "end_date"):
                t = _at(ti.get(what), f"{ti['task_id']} {what}")
                if t is not None:
                    marks.setdefault(ti["task_id"], {}).setdefault(what, []).append(
                        (t - closed).total_seconds())
    return {task: {what: round(statistics.median(v), 1) for what, v in m.items()}
            for task, m in sorted(marks.items(),
                                  key=lambda kv: statistics.median(kv[1].get("start_date",
                                                                             [math.inf])))}


def feeder_health(stats: Path, since: datetime, until: datetime) -> dict[str, Any]:
    """How late the feeder fed in [since, until], from its statistics lines: its loop's
    longest tick (rows are stamped over a tick, so a late one writes rows that reach the
    upstream and the topic as late), the longest a record waited in its producer and the
    broker's slowest answer; a window whose records came later than its grace has findings
    that are right, and are the feeder's, not kafka-recon's."""
    lines = [json.loads(x) for x in stats.read_text().splitlines()] if stats.is_file() else []
    seen = [x for x in lines if since.timestamp() <= x["at"] <= until.timestamp()]
    if not seen:
        return {"samples": 0}
    return {"samples": len(seen),
            "tick_max_s": max(x.get("tick_max_s", 0) for x in seen),
            "producer_wait_max_s": max(x["wait_max_s"] for x in seen),
            "broker_rtt_max_s": max(x["rtt_max_s"] for x in seen),
            "retries": seen[-1]["retries"] - seen[0]["retries"],
            "timeouts": seen[-1]["timeouts"] - seen[0]["timeouts"]}


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank) of `values`."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def summary(rows: list[dict[str, Any]], flows: int, window: timedelta, minutes: float,
            began: datetime, warmup_s: float | None = None) -> dict[str, Any]:
    """`warmup_s`: how long after unpausing every DAG's first run had its verdict, when the
    measured minutes began then."""
    late = [r["after_closing_s"] for r in rows if r["after_closing_s"] is not None]
    statuses: dict[str, int] = {}
    for r in rows:
        statuses[str(r["verdict"])] = statuses.get(str(r["verdict"]), 0) + 1
    return {
        "flows": flows, "window_minutes": window.total_seconds() / 60, "minutes": minutes,
        "began": iso_z(began), "warmup_s": warmup_s, "windows": len(rows),
        "skipped": sum(1 for r in rows if r["verdict"] is None),
        "not_ok": sum(1 for r in rows if r["verdict"] not in (None, "ok")),
        "statuses": statuses,
        "verdict_after_grace_s": {
            "p50": round(statistics.median(late), 1) if late else None,
            "p95": percentile(late, 95) if late else None,
            "max": max(late) if late else None},
        "records_per_window": {"least": min((r["records"] for r in rows if r.get("records")),
                                            default=None),
                               "most": max((r["records"] for r in rows if r.get("records")),
                                           default=None)},
        "rows": rows}


def fleet(a: argparse.Namespace) -> dict[str, Any]:
    work: Path = a.work.resolve()
    # a fleet starts clean: a second run in the same folder found the last one's Airflow
    # database (createdb refused) and would have found its topics and run folders too
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    window = timedelta(minutes=a.window_minutes)
    names = [f"fleet{k:02d}" for k in range(a.flows)]
    pg = PostgresServer(work / "pg").start()
    kafka = KafkaCluster(work / "kafka", size=1, heap="1g", lean=False).start()
    mail = MailCatcher(work / "mail").start()
    connect = SparkConnect(work / "connect", master=a.master)
    (work / "pipelines").mkdir()
    feeds: list[dict[str, Any]] = [
        {"name": n, "topic": f"{n}_orders", "upstream": str(work / "pipelines" / f"{n}.db"),
         "sink_table": f"dst_{n}", "rate": r}
        for n, r in zip(names, rates(a.flows, window, a.least, a.most), strict=True)]
    sink = pg.create_database("fleet_sinks")
    config = work / "flows.yaml"
    config.write_text(flows_yaml(feeds, window, kafka.bootstrap, sink))
    feeder: subprocess.Popen[bytes] | None = None
    servers = AirflowServers(work / "airflow", airflow_env(
        work / "airflow", smtp_port=mail.port, extra={
            "KAFKA_RECON_CONFIG": str(config), "KAFKA_RECON_OUT": str(work / "runs")}),
        database_url=pg.create_database("airflow_fleet"))
    # a fleet's Airflow runs more than four task processes at once: every flow's run has its
    # own tasks, and most of them wait on the warm server or Kafka, not on a core
    servers.env["AIRFLOW__CORE__PARALLELISM"] = str(a.parallelism)
    # a team sizes the replays' pool for its fleet; unset, the setting's own value
    slots = a.replay_slots or replay_slots()
    servers.env["KAFKA_RECON_REPLAY_SLOTS"] = str(slots)
    began = datetime.now(UTC)
    warmup: float | None = None
    timeline: dict[str, dict[str, float]] = {}
    cpu: dict[str, object] = {}
    try:
        connect.start()
        servers.env["KAFKA_RECON_SPARK_REMOTE"] = connect.url
        servers.start()
        make_topics(kafka.bootstrap, [f["topic"] for f in feeds])
        spec = work / "feeder.json"
        # no prefill of the window each DAG runs first on unpausing: a whole window of every
        # flow (1.1M rows for 20) took the feeder more than 90 s of a core, while Airflow
        # started, and the live rows waited behind it; that first window is not measured
        spec.write_text(json.dumps({"bootstrap": kafka.bootstrap, "sink": sink,
                                    "flows": feeds, "stats": str(work / "producer.jsonl")}))
        with (work / "feeder.log").open("ab") as log:
            feeder = subprocess.Popen([sys.executable, "-m", "bench.feeder", str(spec)],
                                      stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
        for n in names:
            servers.unpause(f"recon__{n}")
        unpaused = datetime.now(UTC)
        # measured from the steady state: every DAG runs its first window at once on unpausing,
        # a burst a deployed fleet meets once; a window closing in it queued behind all of
        # them (the seventeenth session's second fleet: 242-352 s, the rest at most 185 s)
        while not warmed(work / "runs", names):
            if (datetime.now(UTC) - unpaused).total_seconds() > a.settle:
                raise SystemExit(f"bench.fleet: the first runs gave no verdict within "
                                 f"{a.settle:.0f} s of unpausing; see {work / 'airflow'}")
            time.sleep(5)
        began = datetime.now(UTC)
        warmup = round((began - unpaused).total_seconds(), 1)
        print(f"every flow's first run has its verdict, {warmup:.0f} s after unpausing",
              flush=True)
        ends = began + timedelta(minutes=a.minutes)
        sampler = CpuSampler().start()  # where the cores go in the measured minutes
        print(f"fleet of {a.flows} flows from {iso_z(began)} to {iso_z(ends)}; work in {work}",
              flush=True)
        while datetime.now(UTC) < ends:
            time.sleep(30)
            done = verdicts(work / "runs", names, window, began, datetime.now(UTC))
            late = [r["after_closing_s"] for r in done if r["after_closing_s"] is not None]
            print(f"{iso_z(datetime.now(UTC))}: {len(late)} of {len(done)} closed windows "
                  f"have a verdict; slowest {max(late, default=0):.0f} s after closing",
                  flush=True)
        cpu = sampler.stop()
        # the windows that closed in the measured minutes get as long as the target allows
        # and more to be written; one not written by then is skipped
        settle = datetime.now(UTC) + timedelta(seconds=a.settle)
        while datetime.now(UTC) < settle:
            rows = verdicts(work / "runs", names, window, began, ends)
            if all(r["verdict"] is not None for r in rows):
                break
            time.sleep(10)
        try:
            timeline = task_timeline(servers, names, began, ends)
        except OSError as exc:  # a diagnostic: the verdicts measured still count without it
            print(f"no task timeline: Airflow's REST API did not answer ({exc})", flush=True)
    finally:
        servers.stop()
        if feeder is not None:
            feeder.terminate()
            try:
                feeder.wait(90)
            except subprocess.TimeoutExpired:
                feeder.kill()
        connect.stop()
        mail.stop()
        kafka.stop()
        pg.stop()
    return {**summary(verdicts(work / "runs", names, window, began, ends), a.flows, window,
                      a.minutes, began, warmup), "replay_slots": slots, "task_timeline": timeline,
            "cpu": cpu, "feeder": feeder_health(work / "producer.jsonl", began, ends)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="make bench-fleet", description=__doc__.splitlines()[0])
    p.add_argument("--flows", type=int, default=20)
    p.add_argument("--window-minutes", type=float, default=5)
    p.add_argument("--minutes", type=float, default=30, help="how long windows are measured")
    p.add_argument("--least", type=int, default=10_000, help="records in a window, least")
    p.add_argument("--most", type=int, default=100_000, help="records in a window, most")
    p.add_argument("--parallelism", type=int, default=16, help="Airflow's [core] parallelism")
    p.add_argument("--master", default="local[2]", help="the Spark Connect server's master")
    p.add_argument("--replay-slots", type=int, default=None,
                   help="the Kafka cluster's replay pool slots (default: the setting's)")
    p.add_argument("--settle", type=float, default=600,
                   help="seconds after the measured minutes for their last verdicts, and "
                        "after unpausing for the first runs'")
    p.add_argument("--work", type=Path, default=REPO_ROOT / "bench-out" / "fleet")
    p.add_argument("--out", type=Path, default=REPO_ROOT / "bench" / "fleet.json")
    a = p.parse_args(argv)
    doc = fleet(a)
    a.out.write_text(json.dumps(doc, indent=2) + "\n")
    s = doc["verdict_after_grace_s"]
    print(json.dumps({k: v for k, v in doc.items() if k != "rows"}, indent=2))
    print(f"p95 {s['p95']} s after closing; {doc['skipped']} skipped; {doc['not_ok']} not ok; "
          f"{a.out}")
    return 0 if doc["skipped"] == 0 and doc["not_ok"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
