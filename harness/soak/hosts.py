"""`make soak-hosts`: kafka-recon as a platform deploys it on more than one host, for an hour,
under host, store, scheduler and pipeline faults, judged window by window.

The deployment: Airflow with the CeleryExecutor (Redis, PostgreSQL metadata) and two worker
hosts, each in a network and mount namespace of its own (harness.services.lab); run folders on
the S3 server; kafka-recon's store and leases in a PostgreSQL of their own; a Spark master whose
worker is a third host; three brokers (replication 3, `min.insync.replicas` 2). Three flows on
5-minute windows are fed by pipelines that never pause (harness.live).

Faults strike at random times, each at least twice (`host_faults.py`): a worker host killed
whole while it runs a Spark step, then back; a worker's network cut for a minute; the S3 server
restarted; the store's PostgreSQL restarted; the scheduler and the triggerer killed and
restarted; a broker killed and restarted; a consumer crash after commit; a producer retrying
without idempotence.

The checker (`check.py`): every window of every flow that closed during the soak is judged once
its run has ended, against the truth read from the tables and the topics. A window left
`inconclusive` by a fault, or without a verdict, is reconciled again through `recon_adhoc` (at
most twice) and judged again: every window must end right. At the end no lease may be held.
Writes docs/soak-hosts.md (one row per window) and docs/soak-hosts.json; exits 1 when a window
does not match, a lease is held, or a fault struck fewer than twice.

    python -m harness.soak.hosts [--minutes 60] [--seed N] [--flows 3] [--docs docs]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from harness.drill.runner import CLUSTER_CONFIG
from harness.live import LivePipeline, floor_to
from harness.services.airflow import (
    AirflowServers,
    celery_env,
    celery_worker,
    ship,
    worker_ready,
)
from harness.services.kafka import KafkaCluster
from harness.services.lab import Host, Lab
from harness.services.postgres import PostgresServer
from harness.services.redis import RedisServer
from harness.services.s3 import S3Server
from harness.services.smtp import MailCatcher
from harness.services.spark import SparkStandalone
from harness.soak.check import judge_window, match_cell, verdict_cell
from harness.soak.faults import Struck, fault_rows, strike
from harness.soak.host_faults import FAULTS, HostFault
from kafka_recon.runfolder import window_folder_name
from kafka_recon.settings import REPO_ROOT, lease_seconds
from kafka_recon.window import Window, iso_z

WINDOW = timedelta(minutes=5)
GRACE = timedelta(minutes=1)
CLOSING = GRACE + timedelta(seconds=10)  # grace 1m + disorder 10s
BUCKET = "recon-runs"
ADHOC = "recon_adhoc"
RERUNS = 2  # re-runs of a window a fault left inconclusive or without a verdict


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass
class Judged:
    """One flow's window under judgement: its runs (the scheduled one, then re-runs)."""

    flow: str
    start: datetime
    end: datetime
    runs: list[tuple[str, str]] = field(default_factory=list)  # (dag id, run id)
    row: dict[str, Any] | None = None  # the last judgement
    final: bool = False

    @property
    def closes(self) -> datetime:
        return self.end + CLOSING


@dataclass
class Soak:
    base: Path
    lab: Lab
    workers: list[Host]
    airflow: AirflowServers
    s3: S3Server
    store: PostgresServer
    store_url: str
    cluster: KafkaCluster
    pipelines: dict[str, LivePipeline]
    deploy: Path
    struck: list[Struck] = field(default_factory=list)

    # ------------------------------------------------------------------ the faults' levers
    def worker_log(self, host: Host) -> Path:
        return self.base / f"{host.name}.log"

    def revive_worker(self, host: Host) -> None:
        host.procs.clear()
        log = self.worker_log(host)
        celery_worker(host, self.airflow.env, self.deploy, log)

    def running_tasks(self) -> list[dict[str, Any]]:
        """Every running task instance of every flow's DAG and of `recon_adhoc`."""
        out = []
        for dag in [*(f"recon__{f}" for f in self.pipelines), ADHOC]:
            code, body = self.airflow.api("GET", f"/dags/{dag}/dagRuns?state=running")
            if code != 200:
                continue
            for run in body.get("dag_runs", []):
                code, tis = self.airflow.api(
                    "GET", f"/dags/{dag}/dagRuns/{run['dag_run_id']}/taskInstances")
                if code == 200:
                    out += [t for t in tis.get("task_instances", [])
                            if t.get("state") == "running"]
        return out

    def spark_step_host(self, wait_s: float) -> tuple[Host, str] | None:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                running = self.running_tasks()
            except OSError:  # the api-server slow or down: ask again
                running = []
            for t in running:
                if t["task_id"] == "replay_reconcile":
                    host = next((w for w in self.workers if w.address == t.get("hostname")),
                                None)
                    if host is not None:
                        return host, f"{t['dag_id']} {t.get('dag_run_id') or t.get('run_id')}"
            time.sleep(3)
        return None

    def strike(self, fault: HostFault, rnd: random.Random) -> None:
        strike(self.struck, fault.name, fault.what, lambda: fault.act(self, rnd))

    def touching(self, start: datetime, until: datetime) -> list[Struck]:
        """Faults that struck between a window's start and `until` (its verdict), a minute
        either side: a fault's effects outlast it."""
        margin = timedelta(minutes=1)
        return [s for s in self.struck
                if s.started <= until + margin and s.ended >= start - margin]

    # ------------------------------------------------------------------ runs and judgements
    def folder(self, w: Judged) -> Path:
        return (self.s3.data / BUCKET / "runs" / w.flow
                / window_folder_name(Window(w.start, w.end)))

    def run_state(self, dag: str, run_id: str) -> str | None:
        code, run = self.airflow.api("GET", f"/dags/{dag}/dagRuns/{run_id}")
        return str(run["state"]) if code == 200 else None

    def rerun(self, w: Judged) -> None:
        conf = {"flow": w.flow, "start": iso_z(w.start), "end": iso_z(w.end), "replays": 2,
                "email": False}
        code, body = self.airflow.api("POST", f"/dags/{ADHOC}/dagRuns",
                                      {"logical_date": None, "conf": conf})
        if code != 200:
            raise RuntimeError(f"triggering {ADHOC} for {w.flow} {iso_z(w.start)}: HTTP {code}:"
                               f" {body}")
        w.runs.append((ADHOC, str(body["dag_run_id"])))

    def settle(self, timeout: float = 900) -> list[str]:
        """The DAGs paused and their runs ended (windows after the soak's end run on until
        then): the leases the store still holds, which should be none."""
        for dag in [*(f"recon__{f}" for f in self.pipelines), ADHOC]:
            self.airflow.api("PATCH", f"/dags/{dag}", {"is_paused": True})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            busy = [dag for dag in [*(f"recon__{f}" for f in self.pipelines), ADHOC]
                    if self.airflow.api("GET", f"/dags/{dag}/dagRuns?state=running&state=queued"
                                        )[1].get("total_entries")]
            if not busy:
                break
            time.sleep(10)
        # a run whose last task could not reach the store left its lease to lapse by itself
        # (the lease's length after its last renewal), as designed: it must not outlive that
        lapse = time.monotonic() + lease_seconds() + 60
        while (leases := held_leases(self.store_url)) and time.monotonic() < lapse:
            time.sleep(10)
        return leases

    def held(self, w: Judged) -> bool:
        """Whether a run holds the window now (a store that does not answer: as if held)."""
        from kafka_recon.errors import ReconError

        try:
            return (w.flow, iso_z(w.start), iso_z(w.end)) in set(held_windows(self.store_url))
        except ReconError:
            return True

    def judge(self, w: Judged) -> None:
        out = self.folder(w)
        result = out / "result.json"
        until = datetime.fromtimestamp(result.stat().st_mtime, UTC) if result.exists() \
            else datetime.now(UTC)
        faults = self.touching(w.start, until)
        row = {"flow": w.flow, "window": iso_z(w.start), "tries": len(w.runs),
               "after_closing_s": round((until - w.closes).total_seconds(), 1)
               if result.exists() else None,
               **judge_window(self.pipelines[w.flow], w.start, w.end, GRACE, out,
                              [s.fault for s in faults])}
        w.row = row
        # a fault made the window unknowable, or its run left no verdict: a re-run within the
        # soak must make it right (an inconclusive no fault explains is wrong at once)
        unknowable = row["verdict"] == "none" or \
            row["verdict"] == "inconclusive" and row["match"] == "yes"
        if unknowable and len(w.runs) <= RERUNS:
            if self.held(w):
                return  # a run that failed holds the window until its lease lapses: wait
            self.rerun(w)
            print(f"{w.flow} {row['window']}: {row['verdict']}, reconciled again", flush=True)
            return
        if row["verdict"] == "inconclusive" and row["match"] == "yes":
            row["match"] = "no"
            row["problems"] = [f"still inconclusive after {len(w.runs)} tries"]
        w.final = True
        print(f"{w.flow} {row['window']}: {row['verdict']} {row['findings']} | truth "
              f"{row['truth']} | tries {row['tries']} | match {row['match']} "
              f"{row.get('problems') or ''}", flush=True)

    def step(self, windows: dict[tuple[str, datetime], Judged], began: datetime,
             ends: datetime) -> None:
        """Every window closed in [began, ends] known; each whose last run ended judged."""
        for flow in self.pipelines:
            code, body = self.airflow.api("GET", f"/dags/recon__{flow}/dagRuns?limit=100")
            if code != 200:
                continue
            for run in body.get("dag_runs", []):
                if run["run_type"] != "scheduled" or not run.get("data_interval_end"):
                    continue
                end = _instant(run["data_interval_end"])
                if not began <= end + CLOSING <= ends:
                    continue
                key = (flow, end)
                if key not in windows:
                    windows[key] = Judged(flow, end - WINDOW, end,
                                           [(f"recon__{flow}", str(run["dag_run_id"]))])
        for w in windows.values():
            if w.final:
                continue
            dag, run_id = w.runs[-1]
            if self.run_state(dag, run_id) in ("success", "failed"):
                self.judge(w)


def held_windows(store_url: str) -> list[tuple[str, str, str]]:
    """(flow, start, end) of every window whose lease the store holds now."""
    from kafka_recon.stores.lease import held

    return sorted(held(store_url))


def held_leases(store_url: str) -> list[str]:
    """The windows whose lease the store still holds, in words."""
    return [f"{f} {s} {e}" for f, s, e in held_windows(store_url)]


def write_docs(docs: Path, rows: list[dict[str, Any]], struck: list[Struck], began: datetime,
               ended: datetime, seed: int, flows: int, leases: list[str],
               short: list[str]) -> None:
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "soak-hosts.json").write_text(json.dumps({
        "began": iso_z(began), "ended": iso_z(ended), "seed": seed, "flows": flows,
        "leases_held_at_end": leases, "faults_struck_fewer_than_twice": short,
        "faults": [{"fault": s.fault, "started": iso_z(s.started), "ended": iso_z(s.ended),
                    "note": s.note} for s in struck],
        "windows": rows}, indent=2) + "\n")
    matched = sum(r["match"] == "yes" for r in rows)
    late = sorted(r["after_closing_s"] for r in rows if r.get("after_closing_s") is not None)
    counts: dict[str, int] = {}
    for s in struck:
        counts[s.fault] = counts.get(s.fault, 0) + 1
    lines = [
        "# The soak on two hosts: Celery workers, object storage, a database store, faults",
        "",
        f"`make soak-hosts` from {iso_z(began)} to {iso_z(ended)} "
        f"({(ended - began).total_seconds() / 60:.0f} minutes, seed {seed}, {flows} flows). "
        "Airflow (CeleryExecutor, Redis, PostgreSQL) ran each flow's `recon__<flow>` DAG on "
        "5-minute windows (`grace: 1m`, `disorder: 10s`) with two Celery workers, each on a "
        "host of its own (a network and mount namespace); run folders on the S3 server; the "
        "store and its leases in a PostgreSQL of their own; Spark on a standalone master whose "
        "worker is a third host; three brokers (replication 3, `min.insync.replicas` 2). Each "
        "flow's application wrote two orders a second upstream, a producer tailed them into "
        "its topic and a consumer loaded its sink, without pause.",
        "",
        "Each window that closed during the soak was judged once its run ended: the verdict "
        "and every finding (kind, side, hop, count, ids) against the truth read from the "
        "tables and the topic. A window a fault left `inconclusive` or without a verdict was "
        f"reconciled again through `recon_adhoc` (at most {RERUNS} times) and judged again.",
        "",
        f"**{matched} of {len(rows)} windows match.** Leases held at the end: "
        f"{', '.join(leases) or 'none'}. Verdicts after closing: "
        + (f"median {late[len(late) // 2]:.0f} s, max {late[-1]:.0f} s." if late else "none."),
        "",
        "## Faults",
        "",
        "| fault | times |",
        "|---|---|",
        *(f"| {name} | {counts.get(name, 0)} |" for name in [f.name for f in FAULTS]),
        "",
        *fault_rows(struck),
        "",
        "## Windows",
        "",
        "| flow | window start | verdict | findings | truth | faults touching | tries "
        "| verdict after closing (s) | match |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['flow']} | {r['window']} | {verdict_cell(r)} | {r['findings']} "
                     f"| {r['truth']} | {', '.join(r['faults']) or '-'} | {r['tries']} "
                     f"| {'-' if r.get('after_closing_s') is None else r['after_closing_s']} "
                     f"| {match_cell(r)} |")
    (docs / "soak-hosts.md").write_text("\n".join(lines) + "\n")


def schedule(rnd: random.Random, began: datetime, ends: datetime,
             faults: list[HostFault] | None = None) -> list[tuple[datetime, HostFault]]:
    """Every fault (of `faults`, default all) twice, in a random order, at random times: the
    first 3 to 5 minutes in, the last at least 4 minutes before the end (a window it touches
    closes in the soak)."""
    faults = FAULTS if faults is None else faults
    order = [*faults, *faults]
    rnd.shuffle(order)
    first = began + timedelta(minutes=rnd.uniform(3, 5))
    room = (ends - timedelta(minutes=4) - first) / max(len(order) - 1, 1)
    return sorted(((first + room * k + timedelta(seconds=rnd.uniform(-20, 20) if k else 0), f)
                   for k, f in enumerate(order)), key=lambda tf: tf[0])


def soak(minutes: float, seed: int, flows: int, docs: Path, only: list[str] | None = None
         ) -> int:
    rnd = random.Random(seed)
    faults = [f for f in FAULTS if not only or f.name in only]
    # outside /tmp, which each host replaces with its own; PostgreSQL, which runs as its own
    # user, must enter it
    base = Path(tempfile.mkdtemp(prefix="kafka-recon-soak-hosts-", dir="/var/tmp"))
    base.chmod(0o755)
    lab = Lab("rsk", 79, keep=[REPO_ROOT]).start()
    started: list[Any] = []
    pipelines: dict[str, LivePipeline] = {}
    windows: dict[tuple[str, datetime], Judged] = {}
    ctx: Soak | None = None
    began = datetime.now(UTC)
    leases: list[str] = []
    try:
        w1, w2, spark_host = lab.host("w1"), lab.host("w2"), lab.host("spark1")
        at = lab.address
        meta_pg = PostgresServer(base / "pg", host=at).start()
        started.append(meta_pg)
        store_pg = PostgresServer(base / "store", host=at).start()
        started.append(store_pg)
        redis = RedisServer(base / "redis", host=at).start()
        started.append(redis)
        cluster = KafkaCluster(base / "kafka", size=3, broker_config=CLUSTER_CONFIG,
                               host=at).start()
        started.append(cluster)
        s3 = S3Server(base / "s3", host=at).start()
        started.append(s3)
        s3.make_bucket(BUCKET)
        mail = MailCatcher(base / "mail", host=at).start()
        started.append(mail)
        spark = SparkStandalone(base / "spark", cores=2, memory="2g", host=at,
                                worker_host=spark_host).start()
        started.append(spark)
        names = [f"orders{k + 1}" for k in range(flows)]
        config = "flows:\n"
        for name in names:
            p = LivePipeline(base / "pipelines" / name, cluster.bootstrap,
                             topic=f"{name}_topic", group=f"{name}-loader", replication=3,
                             topic_config={"min.insync.replicas": "2"})
            pipelines[name] = p
            config += p.flow_yaml(name, window="5m", grace="1m", disorder="10s",
                                  owner=f"{name}@example.com").removeprefix("flows:\n")
        deploy = ship(base / "deploy", config)
        store_url = store_pg.create_database("recon_store")
        meta = meta_pg.create_database("airflow")
        env = celery_env(
            base / "airflow", deploy, at=at, smtp_port=mail.port, redis_url=redis.url,
            metadata_url=meta, store_url=store_url, s3_connection=s3.connection(),
            runs=f"s3://recon_s3@{BUCKET}/runs", spark_master=spark.master)
        servers = AirflowServers(base / "airflow", env, database_url=meta, host=at,
                                 executor="CeleryExecutor").start()
        started.append(servers)
        ctx = Soak(base, lab, [w1, w2], servers, s3, store_pg, store_url, cluster, pipelines,
                   deploy)
        for h in (w1, w2):
            ctx.revive_worker(h)
        deadline = time.monotonic() + 300
        while not all(worker_ready(ctx.worker_log(h)) for h in (w1, w2)):
            if time.monotonic() > deadline:
                raise SystemExit(f"the Celery workers were not ready in 5 minutes; see {base}")
            time.sleep(2)
        for p in pipelines.values():
            p.start()
        servers.unpause(ADHOC)
        for name in names:
            servers.unpause(f"recon__{name}")
        began = datetime.now(UTC)
        ends = began + timedelta(minutes=minutes)
        plan = schedule(rnd, began, ends, faults)
        print(f"soak on two hosts from {iso_z(began)} to {iso_z(ends)}, {flows} flows, "
              f"{len(plan)} faults; work in {base}", flush=True)
        while True:
            now = datetime.now(UTC)
            if plan and now >= plan[0][0]:
                ctx.strike(plan.pop(0)[1], rnd)
                continue
            try:
                ctx.step(windows, began, ends)
            except OSError as exc:  # the api-server busy: the next round asks again
                print(f"{iso_z(now)}: Airflow did not answer ({exc})", flush=True)
            due = floor_to(ends - CLOSING, WINDOW)  # the last window end closed by `ends`
            done = all(w.final for w in windows.values()) and \
                all((f, due) in windows for f in names)
            if now > ends and (done or now > ends + timedelta(minutes=30)):
                break
            time.sleep(5)
        leases = ctx.settle()
    finally:
        for p in pipelines.values():
            p.stop()
        for service in reversed(started):
            service.stop()
        lab.stop()
    rows = sorted((w.row or {"flow": w.flow, "window": iso_z(w.start), "verdict": "none",
                             "findings": "never judged", "truth": "-", "faults": [],
                             "tries": len(w.runs), "match": "no",
                             "problems": ["its run never ended"]}
                   for w in windows.values()), key=lambda r: (r["window"], r["flow"]))
    struck = ctx.struck if ctx else []
    times = {f.name: sum(s.fault == f.name for s in struck) for f in faults}
    short = [name for name, n in times.items() if n < 2]
    write_docs(docs, rows, struck, began, datetime.now(UTC), seed, flows, leases, short)
    bad = [r for r in rows if r["match"] != "yes"]
    print(f"{len(rows) - len(bad)} of {len(rows)} windows match; leases held: "
          f"{leases or 'none'}; faults struck fewer than twice: {short or 'none'}; "
          f"{docs / 'soak-hosts.md'}", flush=True)
    if not bad and not leases and not short and rows:
        shutil.rmtree(base, ignore_errors=True)
        return 0
    print(f"the soak's files are kept in {base}", flush=True)
    return 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="make soak-hosts", description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=60)
    p.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    p.add_argument("--flows", type=int, default=3)
    p.add_argument("--docs", type=Path, default=REPO_ROOT / "docs")
    p.add_argument("--only", nargs="+", choices=[f.name for f in FAULTS], default=None,
                   help="strike only these faults (each twice): to look into one")
    a = p.parse_args(argv)
    return soak(a.minutes, a.seed, a.flows, a.docs, a.only)


if __name__ == "__main__":
    sys.exit(main())
