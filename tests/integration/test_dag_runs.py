"""The daily DAG run by Airflow itself (`airflow dags test`) of a flow PostgreSQL -> topic ->
MariaDB: the upstream's connection (TLS required by the server: `sslmode` in its extra), the
sink's (type mysql, MariaDB's server) and a Kafka connection (SASL_SSL, SCRAM), all held in
Airflow's metadata database, reach every client, Spark included, with their passwords in no
log, no command line, no rendered field, no file of the run, no mail and no lineage event; the
Spark task's OpenLineage events (the provider's file transport) name the topic, the tables and
the result; and a re-run that fails half-way is reported as the inconclusive run it is, never
as the previous run's answer."""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from harness.services.airflow import airflow, airflow_env, airflow_many
from harness.services.kafka import KafkaCluster
from harness.services.kafka_security import USERS, grant, reader_acls
from harness.services.mariadb import MariaDBServer
from harness.services.postgres import PostgresServer
from harness.services.smtp import MailCatcher, read_maildir
from tests.integration.engine_harness import END, START, Scenario

pytestmark = pytest.mark.integration

LOST = {7, 23}


@dataclass
class DagRun:
    work: Path
    env: dict[str, str]
    password: str
    mail: Path
    out: Path
    scn: Scenario
    up: Any  # the upstream's URL (sqlalchemy): PostgreSQL, TLS only
    sink: Any  # the sink's URL (sqlalchemy): MariaDB
    bootstrap: str  # the SASL_SSL listener the Kafka connection names
    store: Any  # kafka-recon's store (sqlalchemy URL): PostgreSQL, named by a connection

    def test(self, log: str, **env: str) -> int:
        """`airflow dags test` of the flow's daily DAG for the window START..END."""
        done = airflow(["dags", "test", "recon__f", END.isoformat()], {**self.env, **env},
                       self.work / log)
        return done.returncode

    def result(self) -> dict[str, Any]:
        return dict(json.loads((self.out / "result.json").read_text()))


@pytest.fixture(scope="module")
def dag(kafka: KafkaCluster, postgres: Any, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[DagRun]:
    work = tmp_path_factory.mktemp("dagrun")
    password = f"pw-{uuid.uuid4().hex}"
    # the upstream's server refuses any connection without TLS (outside pytest's private
    # folder: it runs as the postgres user); the sink's keeps its data apart from `work`, whose
    # files are searched for the password
    tls_pg = PostgresServer(Path(tempfile.mkdtemp(prefix="kafka-recon-pgtls-")), tls=True)
    maria = MariaDBServer(tmp_path_factory.mktemp("mariadb"), password=password)
    tls_pg.start()
    maria.start()
    up = make_url(tls_pg.create_database("dag_up")).set(password=password,
                                                         query={"sslmode": "require"})
    sink = make_url(maria.create_database("dag_sink"))
    # kafka-recon's own store (history, leases, snapshots) in PostgreSQL, through a connection
    store = make_url(postgres.create_database("dag_store")).set(password=password)
    scn = Scenario(work, kafka.bootstrap, up_url=up.render_as_string(hide_password=False),
                   down_url=sink.render_as_string(hide_password=False),
                   kafka_conn="kafka_prod")
    scn.flow_through(40, sink_lacks=LOST, every=10)
    assert kafka.security is not None
    grant(kafka.bootstrap, "recon", reader_acls(scn.topic, []))
    # the flow names connection ids; only Airflow's metadata database knows them
    scn.config.write_text(scn.config.read_text().replace(str(scn.up_url), "up_pg")
                          .replace(str(scn.down_url), "sink_maria"))
    mail = MailCatcher(work / "mail").start()
    env = airflow_env(work / "airflow", smtp_port=mail.port, extra={
        "KAFKA_RECON_CONFIG": str(scn.config), "KAFKA_RECON_OUT": str(work / "runs"),
        "KAFKA_RECON_STORE": "recon_store"})
    conns = work / "conns.json"
    conns.write_text(json.dumps({"up_pg": {
        "conn_type": "postgres", "host": up.host, "port": up.port, "schema": up.database,
        "login": up.username, "password": password,
        "extra": json.dumps({"sslmode": "require", "cursor": "dictcursor"})},
        "sink_maria": {
        "conn_type": "mysql", "host": sink.host, "port": sink.port, "schema": sink.database,
        "login": sink.username, "password": password, "extra": json.dumps({"charset": "utf8mb4"})},
        "recon_store": {"conn_type": "postgres", "host": store.host, "port": store.port,
                        "schema": store.database, "login": store.username,
                        "password": password},
        "kafka_prod": {"conn_type": "kafka",
                       "extra": json.dumps(kafka.security.sasl(kafka.sasl_bootstrap))}}))
    try:
        done = airflow_many([["db", "migrate"], ["connections", "import", str(conns)]], env,
                            work / "setup.log")
        assert done.returncode == 0, work / "setup.log"
        conns.unlink()
        window = f"{START:%Y-%m-%dT%H%M%SZ}_{END:%Y-%m-%dT%H%M%SZ}"
        yield DagRun(work, env, password, work / "mail", work / "runs" / "f" / window, scn, up,
                     sink, kafka.sasl_bootstrap, store)
    finally:
        mail.stop()
        maria.stop()
        tls_pg.stop()
        shutil.rmtree(tls_pg.base_dir, ignore_errors=True)


def _files_holding(root: Path, secret: str) -> list[str]:
    return sorted(str(p) for p in root.rglob("*") if p.is_file()
                  and secret.encode() in p.read_bytes())


def lineage_events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def first_run(dag: DagRun) -> int:
    # OpenLineage's provider, its file transport: one JSON event per line
    transport = {"type": "file", "log_file_path": str(dag.work / "lineage.jsonl"), "append": True}
    return dag.test("first.log", AIRFLOW__OPENLINEAGE__TRANSPORT=json.dumps(transport),
                    AIRFLOW__OPENLINEAGE__NAMESPACE="kafka-recon-test")


def test_a_connection_held_by_airflow_reaches_spark_and_its_password_no_log(
        dag: DagRun, first_run: int) -> None:
    result = dag.result()
    assert first_run != 0, "findings end the run red"
    assert result["status"] == "findings", result["reasons"]
    # every tier read through its connection: the upstream over TLS, the sink from MariaDB
    assert [(t["name"], t["count"]) for t in result["tiers"]] == [
        ("db", 40), ("topic", 40), ("sink", 40 - len(LOST))]
    [loss] = [f for f in result["findings"] if f["kind"] == "loss"]
    assert (loss["hop"], loss["count"]) == ("topic->sink", len(LOST))
    with (dag.out / loss["ids"]).open(newline="", encoding="utf-8") as fh:
        assert {int(r["id"]) for r in csv.DictReader(fh)} == LOST, "exactly the lost ids"

    log = (dag.work / "first.log").read_text()
    assert "Spark-Submit cmd" in log and "kafka-recon-replay_reconcile-f" in log
    # staged in the task through the connections' own provider hooks
    task_logs = log + "".join(p.read_text(errors="replace")
                              for p in (dag.work / "airflow" / "logs").rglob("*") if p.is_file())
    assert "tier 'db': staged through PostgresHook" in task_logs
    assert "tier 'sink': staged through MySqlHook" in task_logs
    assert result["tiers"][1]["count"] == 40, "the replay read the topic over SASL_SSL"
    for secret in (dag.password, USERS["recon"]):
        leaks = _files_holding(dag.work / "airflow" / "logs", secret) + \
            _files_holding(dag.out, secret) + _files_holding(dag.mail, secret) + \
            _files_holding(dag.work, secret) + \
            ([str(dag.work / "first.log")] if secret in log else [])
        assert leaks == [], "a password is in a log, a run file or a mail"
        with sqlite3.connect(dag.work / "airflow" / "airflow.db") as db:
            rendered = [r[0] for r in db.execute(
                "SELECT rendered_fields FROM rendered_task_instance_fields")]
        assert rendered and not [r for r in rendered if secret in str(r)], \
            "a password is in a rendered template field"


def test_the_lineage_of_the_task_and_of_its_spark_job_names_the_topic_and_tables(
        dag: DagRun, first_run: int) -> None:
    events = lineage_events(dag.work / "lineage.jsonl")
    spark = [e for e in events if e["job"]["name"] == "recon__f.replay_reconcile"]
    assert [e["eventType"] for e in spark] == ["START", "COMPLETE"]
    done = spark[-1]
    assert done["job"]["namespace"] == "kafka-recon-test"
    ins = {(d["namespace"], d["name"]) for d in done["inputs"]}
    first = dag.bootstrap.split(",")[0]
    assert ins == {
        (f"postgres://{dag.up.host}:{dag.up.port}", f"{dag.up.database}.public.src"),
        (f"kafka://{first}", dag.scn.topic),
        (f"mysql://{dag.sink.host}:{dag.sink.port}", f"{dag.sink.database}.dst")}, ins
    assert [(d["namespace"], d["name"]) for d in done["outputs"]] == [
        ("file", str(dag.out / "result.json"))]
    assert done["inputs"][0]["facets"]["documentation"]["description"].endswith("flow 'f'")

    # the Spark job's own lineage (the OpenLineage Spark listener), a child of the Airflow task
    [app] = [e for e in events if e["eventType"] == "START" and e["run"]["facets"].get(
        "parent", {}).get("job", {}).get("name") == "recon__f.replay_reconcile"]
    assert app["run"]["facets"]["parent"]["run"]["runId"] == done["run"]["runId"]
    assert app["job"]["namespace"] == "kafka-recon-test"
    plans = [e for e in events if e["job"]["name"].startswith(app["job"]["name"] + ".")]
    read = {(d["namespace"], d["name"]) for e in plans for d in e.get("inputs", [])}
    assert {(f"kafka://{first}", dag.scn.topic),
            (f"postgres://{dag.up.host}:{dag.up.port}", f"{dag.up.database}.src"),
            (f"mysql://{dag.sink.host}:{dag.sink.port}", f"{dag.sink.database}.dst")} <= read, \
        read
    assert {e["eventType"] for e in plans} >= {"START", "COMPLETE"}


def test_a_rerun_that_fails_after_staging_is_reported_inconclusive_not_the_old_answer(
        dag: DagRun, first_run: int, tmp_path: Path) -> None:
    assert dag.result()["status"] == "findings"  # what the first run left
    # spark-submit cannot find its application: the replay task fails, no Python runs
    # no retries here, and only here: this is what a run reports once a step has failed for
    # good; the shipped retries would fail the same way after 2 and 4 minutes of backoff (the
    # live-scheduler test runs the shipped retries)
    exit_code = dag.test("second.log", KAFKA_RECON_SPARK_JOBS=str(tmp_path / "nowhere"),
                         KAFKA_RECON_TASK_RETRIES="0")
    assert exit_code != 0, "the DAG run is red"
    result = dag.result()
    assert result["status"] == "inconclusive"
    assert result["reasons"] == [
        "the 'replay' step did not finish: it never began (its task failed before the step "
        "started, or an earlier task failed; see the task logs)"]
    assert not (dag.out / "validation.json").exists(), "the old validation is gone"
    assert "records lost" not in (dag.out / "report.html").read_text()
    subjects = [m["Subject"] for m in read_maildir(dag.mail)]
    assert subjects[-1].startswith("INCONCLUSIVE f: "), subjects

    from kafka_recon.outputs import history
    from kafka_recon.sources.connections import normalise

    eng = history.engine(normalise(dag.store.render_as_string(hide_password=False)))
    [row] = history.flow_runs("f", eng=eng)
    assert row["status"] == "inconclusive" and "'replay' step did not finish" in row["summary"]
    assert not (dag.work / "runs" / "history.db").exists(), "the store is PostgreSQL's"
    with eng.connect() as con:  # each run let its window go at its end
        assert con.exec_driver_sql("SELECT count(*) FROM recon_lease").scalar_one() == 0


def test_with_a_spark_connect_server_the_dag_runs_its_spark_step_there_and_no_password_leaks(
        dag: DagRun, first_run: int, spark_connect: Any) -> None:
    """`KAFKA_RECON_SPARK_REMOTE` on the workers: the Spark task runs its step in a session of
    the server (no spark-submit, no Spark of its own), with the same answer, and the
    connections' passwords, which the session hands the server, are in none of its logs."""
    server = spark_connect
    exit_code = dag.test("connect.log", KAFKA_RECON_SPARK_REMOTE=server.url)
    assert exit_code != 0, "findings end the run red"
    result = dag.result()
    assert result["status"] == "findings", result["reasons"]
    assert [t["count"] for t in result["tiers"]] == [40, 40, 40 - len(LOST)]
    [loss] = [f for f in result["findings"] if f["kind"] == "loss"]
    assert (loss["hop"], loss["count"]) == ("topic->sink", len(LOST))
    log = (dag.work / "connect.log").read_text()
    assert "Spark-Submit cmd" not in log
    assert f"kafka-recon replay_reconcile through the Spark Connect server {server.url}" in log
    for secret in (dag.password, USERS["recon"]):
        assert secret not in log and secret not in server.log.read_text()
        assert _files_holding(dag.work / "airflow" / "logs", secret) == []
        assert _files_holding(dag.out, secret) == []
