"""`make ui`: Airflow on loopback with the demo flow's history on the Reconciliation page.

Starts Kafka, an SMTP catcher, a private PostgreSQL (Airflow's metadata) and Airflow's four
components; makes three days of demo data (the consumer loses one batch); backfills the flow's own
daily DAG over those days through the REST API, so the page (and the DAG) fill with real runs as
they finish;
prints the address and the login; stops everything on Ctrl-C.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from harness.demo.__main__ import FLOW, demo_env, make_data
from harness.services.airflow import AirflowServers
from harness.services.kafka import KafkaCluster
from harness.services.postgres import PostgresServer
from harness.services.smtp import MailCatcher
from kafka_recon.settings import REPO_ROOT

DAYS = 3


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="make ui", description=__doc__.splitlines()[0])
    p.add_argument("--workdir", type=Path, default=REPO_ROOT / "ui-out")
    p.add_argument("--port", type=int, default=8080, help="Airflow's port (default 8080)")
    p.add_argument("--days", type=int, default=DAYS, help="days of history to reconcile")
    a = p.parse_args(argv)
    workdir = a.workdir.resolve()
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    first = today - timedelta(days=a.days)

    kafka = KafkaCluster(workdir / "kafka", size=1)
    mail = MailCatcher(workdir / "mail")
    # outside the work folder's parents' permissions: the server runs as the postgres user
    pg = PostgresServer(Path(tempfile.mkdtemp(prefix="kafka-recon-ui-pg-")))
    servers: AirflowServers | None = None
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    try:
        kafka.start()
        mail.start()
        pg.start()
        facts = make_data(workdir, kafka.bootstrap, first, today, 400 * a.days, 3)
        print(f"demo data: {facts['upstream']} orders over {a.days} days, "
              f"{len(facts['lost_consume_side'])} lost by the consumer", flush=True)
        servers = AirflowServers(workdir / "airflow",
                                 demo_env(workdir, kafka.bootstrap, mail.port),
                                 port=a.port, database_url=pg.create_database("airflow"))
        servers.start()
        # the days are the flow's own DAG's windows, backfilled, so its history is its own
        # (the scheduler then finds them run, and waits for today's to close)
        dag_id = f"recon__{FLOW}"
        code, body = servers.api("POST", "/backfills", {
            "dag_id": dag_id, "from_date": f"{first:%Y-%m-%dT%H:%M:%SZ}",
            "to_date": f"{today - timedelta(days=1):%Y-%m-%dT%H:%M:%SZ}",
            "max_active_runs": 1, "reprocess_behavior": "none"})
        if code != 200:
            raise RuntimeError(f"backfilling {dag_id} failed: {code} {body}")
        servers.unpause(dag_id)
        print(f"\nAirflow:        {servers.url}  (login {servers.user} / {servers.password})")
        print(f"Reconciliation: {servers.url}/plugin/reconciliation")
        print(f"mails:          {workdir / 'mail'}")
        print(f"{a.days} daily windows of {FLOW} are backfilled by its DAG; the page fills as "
              "they finish. Ctrl-C stops everything.", flush=True)
        while not stop["now"]:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        if servers:
            servers.stop()
        mail.stop()
        kafka.stop()
        pg.stop()
        shutil.rmtree(pg.base_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
