"""`make demo`: the whole idea once, end to end, on real parts.

Kafka (KRaft) and an SMTP server on loopback; an upstream SQLite table; a producer and a consumer
app that loses a known batch; the daily DAG run by `airflow dags test` (stage, Spark replay,
reconcile, Great Expectations, report, mail). Prints the report, the captured mail and a verdict,
and checks the verdict against the consumer's own ledger.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from harness.drill import ledger
from harness.drill.apps import CRASH_EXIT
from harness.drill.runner import CONSUMER_BASE, SAFE_PRODUCER, App, drain
from harness.drill.truth import sql_time
from harness.services.airflow import airflow, airflow_env
from harness.services.kafka import KafkaCluster
from harness.services.smtp import MailCatcher
from kafka_recon.runfolder import RunFolder, window_folder_name
from kafka_recon.settings import REPO_ROOT
from kafka_recon.window import Window

FLOW = "demo_orders"
TOPIC = "orders"
GROUP = "orders-loader"


def _tables(workdir: Path, start: datetime, end: datetime, rows: int, seed: int = 7) -> None:
    """`src` upstream with `rows` orders spread over the window, ids in time order (as a CDC
    connector reads a log), and an empty sink `dst` (the drill apps' tables)."""
    rnd = random.Random(seed)
    span = int((end - start).total_seconds())
    times = sorted(start + timedelta(seconds=rnd.randrange(span)) for _ in range(rows))
    for db, ddl in (("upstream.db", "CREATE TABLE src (id INTEGER PRIMARY KEY, ts TEXT)"),
                    ("sink.db", "CREATE TABLE dst (id INTEGER, ts TEXT)")):
        (workdir / db).unlink(missing_ok=True)
        with sqlite3.connect(workdir / db) as con:
            con.execute(ddl)
            if db == "upstream.db":
                con.executemany("INSERT INTO src VALUES (?, ?)",
                                [(i, sql_time(t)) for i, t in enumerate(times, 1)])


def _ids(db: Path, table: str) -> set[int]:
    with sqlite3.connect(db) as con:
        return {int(r[0]) for r in con.execute(f"SELECT id FROM {table}")}  # noqa: S608


def truth(workdir: Path) -> dict[str, Any]:
    """What the demo really lost, from the apps' ledgers and the tables, not from kafka-recon.

    The consumer dropped the records it committed and never wrote: acknowledged at an offset
    below its committed offset for the partition, and not in its `processed` ledger.
    """
    up = _ids(workdir / "upstream.db", "src")
    sink = _ids(workdir / "sink.db", "dst")
    apps = workdir / "apps"
    acked = ledger.read(apps / "producer" / "ledger", "acked")
    committed: dict[int, int] = {}
    for c in ledger.read(apps / "consumer" / "ledger", "committed"):
        committed[int(c["partition"])] = max(committed.get(int(c["partition"]), 0),
                                             int(c["offset"]))
    processed = set(ledger.ids(apps / "consumer" / "ledger", "processed"))
    dropped = sorted(int(a["id"]) for a in acked if int(a["id"]) not in processed
                     and int(a["offset"]) < committed.get(int(a["partition"]), 0))
    acked_ids = {int(a["id"]) for a in acked}
    return {"upstream": len(up), "acked": len(acked_ids), "sink": len(sink),
            "lost_consume_side": sorted(acked_ids - sink),
            "lost_write_side": sorted(up - acked_ids), "consumer_dropped": dropped}


def make_data(workdir: Path, bootstrap: str, start: datetime, end: datetime, orders: int,
              crash_after_batches: int) -> dict[str, Any]:
    """The demo pipeline, run by the drill's own client apps: a safe producer, and a consumer
    that commits before processing and crashes after committing a batch; it is restarted and
    resumes from the committed offsets, so that batch is lost on the consume side."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(TOPIC, 3, 1)]).values():
        fut.result(30)
    _tables(workdir, start, end, orders)
    apps = workdir / "apps"
    producer = App("producer", apps / "producer", {
        "bootstrap": bootstrap, "topic": TOPIC, "upstream": str(workdir / "upstream.db"),
        "config": SAFE_PRODUCER, "timestamps": "row"}).start()
    if producer.wait(300) != 0:
        raise RuntimeError(f"demo producer failed, see {apps / 'producer'}")
    spec = {"bootstrap": bootstrap, "topic": TOPIC, "group": GROUP, "commit": "before",
            "sink": str(workdir / "sink.db"), "config": CONSUMER_BASE, "batch": 100}
    consumer = App("consumer", apps / "consumer",
                   {**spec, "crash_after_batches": crash_after_batches}).start()
    code = consumer.wait(300)
    if code != CRASH_EXIT:
        raise RuntimeError(f"demo consumer should have crashed (exit {CRASH_EXIT}), got {code}; "
                           f"see {apps / 'consumer'}")
    # the restarted consumer resumes from the committed offsets: the crashed batch is skipped
    consumer.spec.pop("crash_after_batches")
    drain(consumer.start())
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


def demo_env(workdir: Path, bootstrap: str, smtp_port: int) -> dict[str, str]:
    """Airflow's environment for the demo flow: its config, connections and run folder."""
    return airflow_env(workdir / "airflow", smtp_port=smtp_port, extra={
        "KAFKA_RECON_CONFIG": str(REPO_ROOT / "config" / "flows.yaml"),
        "KAFKA_RECON_OUT": str(workdir / "runs"),
        "KAFKA_RECON_BOOTSTRAP": bootstrap,
        "KAFKA_RECON_DEMO_TOPIC": TOPIC,
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


def latest_closed_day(now: datetime | None = None) -> datetime:
    """The end (midnight UTC) of the latest day whose window has closed, with an hour to spare:
    shortly after midnight yesterday's window is still inside its closing time (the demo
    flow's 10-minute grace and 5-minute disorder margin), and its run would wait for it."""
    closed = (now or datetime.now(UTC)) - timedelta(hours=1)
    return closed.replace(hour=0, minute=0, second=0, microsecond=0)


def run_demo(workdir: Path, orders: int = 1000, crash_after_batches: int = 3) -> DemoOutcome:
    """Services up, data made, the daily DAG run by `airflow dags test`, services down."""
    workdir = workdir.resolve()
    if workdir.exists():
        shutil.rmtree(workdir)  # from nothing, every time
    workdir.mkdir(parents=True)
    end = latest_closed_day()
    start = end - timedelta(days=1)  # the daily DAG's window

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
        # what a user runs first: could the flow run, and what would it read? (no Spark)
        checked = subprocess.run(
            [str(Path(sys.executable).parent / "kafka-recon"), "check", "--flow", FLOW,
             "--start", start.isoformat(), "--end", end.isoformat()],
            env=env, capture_output=True, text=True, timeout=300, check=False)
        print(checked.stdout + checked.stderr, end="", flush=True)
        if checked.returncode != 0:
            raise RuntimeError(f"kafka-recon check of the demo flow: exit {checked.returncode}")
        if airflow(["db", "migrate"], env, log).returncode != 0:
            raise RuntimeError(f"airflow db migrate failed, see {log}")
        # run the day after the window: the data interval of that run is the window
        dag = airflow(["dags", "test", f"recon__{FLOW}", end.isoformat()], env, log)
        print(f"airflow dags test recon__{FLOW} {end.date()}: exit {dag.returncode} "
              f"(a run with findings ends failed on purpose), log {log}", flush=True)
    finally:
        mail.stop()
        kafka.stop()
    run = workdir / "runs" / FLOW / window_folder_name(Window(start, end))
    result_path = RunFolder(run).result
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
