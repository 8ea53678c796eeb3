"""`make demo`: the whole idea once, end to end, on real parts.

Kafka (KRaft) and an SMTP server on loopback; an upstream SQLite table; a producer and a consumer
app that loses a known batch; the daily DAG run by `airflow dags test` (stage, Spark replay,
reconcile, Great Expectations, report, mail). Prints the report, the captured mail and a verdict,
and checks the verdict against the consumer's own ledger.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from harness.demo import upstream
from harness.demo.consumer import CRASH_EXIT
from harness.demo.producer import publish_orders
from harness.services.airflow import airflow, airflow_env
from harness.services.kafka import KafkaCluster
from harness.services.smtp import MailCatcher
from kafka_recon.settings import REPO_ROOT

FLOW = "demo_orders"
TOPIC = "orders"


def truth(workdir: Path) -> dict[str, Any]:
    """What the demo really lost, from the apps' ledgers and the tables, not from kafka-recon."""
    up = upstream.ids(workdir / "upstream.db", "orders")
    sink = upstream.ids(workdir / "sink.db", "orders_copy")
    crashed: list[int] = []
    for line in (workdir / "ledger" / "consumer.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["event"] == "crash":
            crashed += event["unprocessed"]
    acked = set(json.loads((workdir / "ledger" / "producer.json").read_text())["acked"])
    return {"upstream": len(up), "acked": len(acked), "sink": len(sink),
            "lost_consume_side": sorted(acked - sink), "lost_write_side": sorted(up - acked),
            "consumer_dropped": sorted(crashed)}


def make_data(workdir: Path, bootstrap: str, start: datetime, end: datetime, orders: int,
              crash_after_batches: int) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(TOPIC, 3, 1)]).values():
        fut.result(30)
    upstream.create_orders(workdir / "upstream.db", start, end, orders)
    upstream.create_sink(workdir / "sink.db")
    ledger = workdir / "ledger"
    publish_orders(workdir / "upstream.db", bootstrap, TOPIC, ledger / "producer.json")
    base = [sys.executable, "-m", "harness.demo.consumer", "--bootstrap", bootstrap,
            "--topic", TOPIC, "--db", str(workdir / "sink.db"),
            "--ledger", str(ledger / "consumer.jsonl")]
    first = subprocess.run([*base, "--crash-after-batches", str(crash_after_batches)],
                           capture_output=True, text=True, check=False, timeout=300)
    if first.returncode != CRASH_EXIT:
        raise RuntimeError(f"demo consumer should have crashed (exit {CRASH_EXIT}), "
                           f"got {first.returncode}: {first.stderr[-2000:]}")
    # the restarted consumer resumes from the committed offsets: the crashed batch is skipped
    subprocess.run(base, capture_output=True, text=True, check=True, timeout=300)
    return truth(workdir)


def lost_ids(run_dir: Path, result: dict[str, Any]) -> list[str]:
    """Every id of the result's consume-side loss files."""
    import csv

    ids: list[str] = []
    for f in result["findings"]:
        if f["kind"] == "loss" and f["side"] == "consume" and f.get("ids"):
            with (run_dir / f["ids"]).open() as fh:
                ids += [row["id"] for row in csv.DictReader(fh)]
    return ids


def demo_env(workdir: Path, bootstrap: str, smtp_port: int, retries: int = 0) -> dict[str, str]:
    """Airflow's environment for the demo flow: its config, connections and run folder."""
    return airflow_env(workdir / "airflow", smtp_port=smtp_port, extra={
        "KAFKA_RECON_CONFIG": str(REPO_ROOT / "config" / "flows.yaml"),
        "KAFKA_RECON_OUT": str(workdir / "runs"),
        "KAFKA_RECON_BOOTSTRAP": bootstrap,
        "KAFKA_RECON_DEMO_TOPIC": TOPIC,
        # the demo shows one attempt; retries back off for minutes
        "KAFKA_RECON_TASK_RETRIES": str(retries),
        "AIRFLOW_CONN_UPSTREAM_DB": f"sqlite:///{workdir / 'upstream.db'}",
        "AIRFLOW_CONN_SINK_DB": f"sqlite:///{workdir / 'sink.db'}",
    })


@dataclass
class DemoOutcome:
    run_dir: Path
    result: dict[str, Any] | None
    facts: dict[str, Any]
    mails: list[Path]
    dag_exit: int


def run_demo(workdir: Path, orders: int = 1000, crash_after_batches: int = 3) -> DemoOutcome:
    """Services up, data made, the daily DAG run by `airflow dags test`, services down."""
    workdir = workdir.resolve()
    if workdir.exists():
        shutil.rmtree(workdir)  # from nothing, every time
    workdir.mkdir(parents=True)
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start, end = today - timedelta(days=1), today  # yesterday: the daily DAG's window

    kafka = KafkaCluster(workdir / "kafka", size=1)
    mail = MailCatcher(workdir / "mail")
    try:
        kafka.start()
        mail.start()
        print(f"kafka on {kafka.bootstrap}, smtp on 127.0.0.1:{mail.port}", flush=True)
        facts = make_data(workdir, kafka.bootstrap, start, end, orders, crash_after_batches)
        print(f"demo data: {facts['upstream']} orders upstream, {facts['acked']} acknowledged "
              f"by kafka, {facts['sink']} in the sink", flush=True)
        env = demo_env(workdir, kafka.bootstrap, mail.port)
        log = workdir / "airflow.log"
        if airflow(["db", "migrate"], env, log).returncode != 0:
            raise RuntimeError(f"airflow db migrate failed, see {log}")
        # run the day after the window: the data interval of that run is the window
        dag = airflow(["dags", "test", f"recon__{FLOW}", end.isoformat()], env, log)
        print(f"airflow dags test recon__{FLOW} {end.date()}: exit {dag.returncode} "
              f"(a run with findings ends failed on purpose), log {log}", flush=True)
    finally:
        mail.stop()
        kafka.stop()
    run = workdir / "runs" / FLOW / f"{start:%Y-%m-%dT%H%M%SZ}_{end:%Y-%m-%dT%H%M%SZ}"
    result_path = run / "result.json"
    result = json.loads(result_path.read_text()) if result_path.exists() else None
    return DemoOutcome(run, result, facts, sorted((workdir / "mail").glob("*.eml")),
                       dag.returncode)


def main(argv: list[str] | None = None) -> int:
    from kafka_recon.result.model import Result

    p = argparse.ArgumentParser(prog="make demo", description=__doc__.splitlines()[0])
    p.add_argument("--workdir", type=Path, default=REPO_ROOT / "demo-out")
    p.add_argument("--orders", type=int, default=1000)
    p.add_argument("--crash-after-batches", type=int, default=3)
    a = p.parse_args(argv)
    t0 = time.monotonic()
    o = run_demo(a.workdir, a.orders, a.crash_after_batches)
    if o.result is None:
        print(f"FAILED: no result in {o.run_dir}; see {a.workdir / 'airflow.log'}")
        return 2
    lost = len(o.facts["lost_consume_side"])
    found = sum(f["count"] for f in o.result["findings"]
                if f["kind"] == "loss" and f["side"] == "consume")
    found_ids = sorted(int(i) for i in lost_ids(o.run_dir, o.result))
    print(f"report: {o.run_dir / 'report.html'}")
    print(f"mail:   {o.mails[-1] if o.mails else 'NONE RECEIVED'}")
    print(f"verdict: {Result.from_json(o.result).verdict()}")
    agree = (found == lost and found_ids == o.facts["lost_consume_side"]
             and not o.facts["lost_write_side"] and bool(o.mails))
    print(f"check: the consumer's ledger says {lost} records were lost on the consume side; "
          f"kafka-recon found {found}, id for id {'the same' if agree else 'NOT the same'}: "
          f"{'MATCH' if agree else 'MISMATCH'} ({time.monotonic() - t0:.0f}s)")
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())
