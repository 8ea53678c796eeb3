"""`make soak`: kafka-recon as deployed, for a long while, under faults, judged window by window.

Airflow's real scheduler (api-server, scheduler, dag-processor, triggerer; LocalExecutor on a
private PostgreSQL) runs a 5-minute flow's DAG while its pipeline never pauses: an application
writing orders upstream, the drill's producer tailing them into a topic on a three-broker
cluster, the drill's consumer loading the sink. Faults strike at random times (`faults.py`).
Every window that closed during the soak is judged once its DAG run has ended: its verdict and
every finding (kind, side, hop, count, ids) against the truth read from the tables and the
topic themselves (harness.drill.truth). A window may be inconclusive only when a fault touched
it, and its reasons must say why. Writes docs/soak.md (a row per window) and docs/soak.json;
exits 1 when any window does not match.

    python -m harness.soak [--minutes 45] [--seed N] [--docs docs]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from harness.drill.runner import CLUSTER_CONFIG
from harness.live import LivePipeline, floor_to
from harness.services.airflow import AirflowServers, airflow_env
from harness.services.kafka import KafkaCluster
from harness.services.postgres import PostgresServer
from harness.services.smtp import MailCatcher
from harness.soak.check import judge_window, match_cell, verdict_cell
from harness.soak.faults import FAULTS, Fault, Struck, fault_rows, strike
from kafka_recon.runfolder import window_folder_name
from kafka_recon.settings import REPO_ROOT
from kafka_recon.window import Window, iso_z

FLOW = "soak"
DAG = f"recon__{FLOW}"
WINDOW = timedelta(minutes=5)
GRACE = timedelta(minutes=1)
CLOSING = GRACE + timedelta(seconds=10)  # grace 1m + disorder 10s


@dataclass
class Soak:
    work: Path
    pipeline: LivePipeline
    cluster: KafkaCluster
    airflow: AirflowServers
    struck: list[Struck] = field(default_factory=list)

    def strike(self, fault: Fault, rnd: random.Random) -> None:
        strike(self.struck, fault.name, fault.what, lambda: fault.act(self, rnd))

    def runs(self, token: str) -> list[dict[str, Any]]:
        code, body = self.airflow.api("GET", f"/dags/{DAG}/dagRuns?limit=100", token=token)
        if code != 200:
            raise RuntimeError(f"listing {DAG}'s runs: HTTP {code}: {body}")
        return [r for r in body["dag_runs"] if r["run_type"] == "scheduled"]

    def touching(self, start: datetime, end: datetime) -> list[Struck]:
        """Faults that struck between the window's start and its closing, or while its run
        counted (a minute either side: a fault's effects outlast it)."""
        margin = timedelta(minutes=1)
        return [s for s in self.struck
                if s.started <= end + margin and s.ended >= start - margin]


def judge(soak: Soak, run: dict[str, Any]) -> dict[str, Any]:
    """One window: its verdict and findings against the truth of its tiers."""
    start = datetime.fromisoformat(run["data_interval_start"].replace("Z", "+00:00"))
    end = datetime.fromisoformat(run["data_interval_end"].replace("Z", "+00:00"))
    out = soak.work / "runs" / FLOW / window_folder_name(Window(start, end))
    faults = soak.touching(start, end + CLOSING + timedelta(minutes=3))
    return {"window": iso_z(start), "dag_run": run["state"],
            **judge_window(soak.pipeline, start, end, GRACE, out, [s.fault for s in faults])}


def write_docs(docs: Path, rows: list[dict[str, Any]], struck: list[Struck],
               began: datetime, ended: datetime, seed: int) -> None:
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "soak.json").write_text(json.dumps({
        "began": iso_z(began), "ended": iso_z(ended), "seed": seed,
        "faults": [{"fault": s.fault, "started": iso_z(s.started), "ended": iso_z(s.ended),
                    "note": s.note} for s in struck],
        "windows": rows}, indent=2) + "\n")
    matched = sum(r["match"] == "yes" for r in rows)
    lines = [
        "# The soak: a live scheduler, a pipeline that never pauses, faults at random",
        "",
        f"`make soak` from {iso_z(began)} to {iso_z(ended)} "
        f"({(ended - began).total_seconds() / 60:.0f} minutes, seed {seed}): Airflow's "
        "scheduler, triggerer, dag-processor and api-server (LocalExecutor, PostgreSQL) ran "
        f"`{DAG}`, a flow with `window: 5m`, `grace: 1m`, `disorder: 10s`, while an "
        "application wrote two orders a second upstream, the drill's producer tailed them into "
        "a topic on three brokers (replication 3, `min.insync.replicas` 2) and the drill's "
        "consumer loaded the sink. Each window that closed during the soak was judged after "
        "its DAG run ended: the verdict and every finding (kind, side, hop, count, ids) against "
        "the truth read from the tables and the topic themselves.",
        "",
        f"**{matched} of {len(rows)} windows match.**",
        "",
        "## Faults",
        "",
        *fault_rows(struck),
        "",
        "## Windows",
        "",
        "| window start | verdict | findings | truth | faults touching | match |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['window']} | {verdict_cell(r)} | {r['findings']} | {r['truth']} "
                     f"| {', '.join(r['faults']) or '-'} | {match_cell(r)} |")
    (docs / "soak.md").write_text("\n".join(lines) + "\n")


def soak(minutes: float, seed: int, docs: Path, work: Path) -> int:
    rnd = random.Random(seed)
    work.mkdir(parents=True, exist_ok=True)
    pg = PostgresServer(work / "pg").start()
    cluster = KafkaCluster(work / "kafka", size=3, broker_config=CLUSTER_CONFIG).start()
    mail = MailCatcher(work / "mail").start()
    pipeline = LivePipeline(work / "pipeline", cluster.bootstrap, replication=3,
                            topic_config={"min.insync.replicas": "2"})
    config = work / "flows.yaml"
    config.write_text(pipeline.flow_yaml(FLOW, window="5m", grace="1m", disorder="10s"))
    servers = AirflowServers(work / "airflow", airflow_env(
        work / "airflow", smtp_port=mail.port, extra={
            "KAFKA_RECON_CONFIG": str(config), "KAFKA_RECON_OUT": str(work / "runs")}),
        database_url=pg.create_database("airflow_soak"))
    rows: dict[str, dict[str, Any]] = {}
    ctx = Soak(work, pipeline, cluster, servers)
    began = datetime.now(UTC)
    try:
        servers.start()
        pipeline.start()
        servers.unpause(DAG)
        began = datetime.now(UTC)
        ends = began + timedelta(minutes=minutes)
        token = servers.token()  # Airflow's tokens last a day
        order = FAULTS[:]
        rnd.shuffle(order)
        next_at = began + timedelta(minutes=rnd.uniform(3, 6))
        k = 0
        print(f"soak from {iso_z(began)} to {iso_z(ends)}; work in {work}", flush=True)
        while True:
            now = datetime.now(UTC)
            if now < ends - timedelta(minutes=2) and now >= next_at:
                ctx.strike(order[k % len(order)], rnd)
                k += 1
                next_at = datetime.now(UTC) + timedelta(minutes=rnd.uniform(3, 7))
            runs = ctx.runs(token)
            for r in runs:
                closes = datetime.fromisoformat(
                    r["data_interval_end"].replace("Z", "+00:00")) + CLOSING
                if closes <= ends and r["state"] in ("success", "failed") \
                        and r["dag_run_id"] not in rows:
                    rows[r["dag_run_id"]] = row = judge(ctx, r)
                    print(f"window {row['window']}: {row['verdict']} {row['findings']} | "
                          f"truth {row['truth']} | match {row['match']} "
                          f"{row.get('problems') or ''}", flush=True)
            # every window that closed during the soak has been judged
            due = floor_to(ends - CLOSING, WINDOW)  # the last window end closed by `ends`
            judged_ends = {datetime.fromisoformat(r["data_interval_end"].replace("Z", "+00:00"))
                           for r in runs if r["dag_run_id"] in rows}
            if now > ends and (due in judged_ends or now > ends + timedelta(minutes=15)):
                break
            time.sleep(2)
    finally:
        servers.stop()
        pipeline.stop()
        mail.stop()
        cluster.stop()
        pg.stop()
    ordered = sorted(rows.values(), key=lambda r: r["window"])
    write_docs(docs, ordered, ctx.struck, began, datetime.now(UTC), seed)
    bad = [r for r in ordered if r["match"] != "yes"]
    print(f"{len(ordered) - len(bad)} of {len(ordered)} windows match; {docs / 'soak.md'}")
    return 1 if bad or not ordered else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="make soak", description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=45)
    p.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    p.add_argument("--docs", type=Path, default=REPO_ROOT / "docs")
    p.add_argument("--work", type=Path, default=REPO_ROOT / "soak-out")
    a = p.parse_args(argv)
    return soak(a.minutes, a.seed, a.docs, a.work.resolve())


if __name__ == "__main__":
    sys.exit(main())
