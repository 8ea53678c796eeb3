"""A pipeline made of connectors, on Kafka Connect's own runtime: a Debezium PostgreSQL source
captures a table into a topic, and sink connectors load the topic into two tables, one with a
dead-letter queue and one that skips the records it cannot write (errors.tolerance=all).

Real here: the broker (KRaft), PostgreSQL (Debian's, wal_level=logical), Kafka Connect's
distributed worker (connect-runtime 4.2.1), Debezium's PostgreSQL connector 3.6.1.Final
(pgoutput) and Spark. The sink connector is the harness's own (harness/connect/src: Maven
Central serves no JDBC sink that runs here); what it is given to do, skip a record or route it
to the dead-letter queue, and the queue's records and headers, are Connect's.

The poison records are rows whose `customer` is null: the source table allows it, the sink
tables do not (NOT NULL), so the database refuses them and the sink reports them to Connect's
errant record reporter, as the common JDBC sinks do.
"""

from __future__ import annotations

import csv
import shutil
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from harness.services.connect import ConnectWorker, debezium_postgres, sql_sink
from harness.services.kafka import KafkaCluster
from kafka_recon import orchestrate
from tests.report_lines import meaningless

pytestmark = pytest.mark.integration

ROWS = 60
POISON = {13, 29, 47}          # customer null: refused by both sinks
SINK_TABLE = ("(id bigint, event_time timestamptz not null, customer text not null, "
              "amount int)")


TOPIC = "shop.public.orders"
COLUMNS = "id,event_time,customer,amount"


class Pipeline:
    def __init__(self, kafka: KafkaCluster, pg: Any, worker: ConnectWorker, db: str,
                 base: Path) -> None:
        self.kafka, self.pg, self.worker, self.db, self.base = kafka, pg, worker, db, base
        self.url = pg.url(db)
        self.jdbc = f"jdbc:postgresql://{pg.host}:{pg.port}/{db}?user={pg.user}"
        # the window the rows were written in
        self.start = self.end = datetime.now(UTC)

    def sql(self, query: str, *args: Any) -> list[tuple[Any, ...]]:
        import psycopg2

        with psycopg2.connect(self.url) as c, c.cursor() as cur:
            cur.execute(query, args)
            return cur.fetchall() if cur.description else []

    def wait_rows(self, table: str, rows: int, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.sql(f"select count(*) from {table}")[0][0] >= rows:  # noqa: S608
                return
            time.sleep(1)
        raise AssertionError(f"{table}: fewer than {rows} rows after {timeout}s; Connect's "
                             f"log ends:\n{self.worker.log_tail()}")


@pytest.fixture(scope="module")
def pipeline(kafka: KafkaCluster) -> Iterator[Pipeline]:
    from harness.services.postgres import PostgresServer

    base = Path(tempfile.mkdtemp(prefix="kafka-recon-connect-"))
    # its own folder: the server runs as the postgres user, who cannot enter `base` (0700)
    pg_base = Path(tempfile.mkdtemp(prefix="kafka-recon-connect-pg-"))
    pg = PostgresServer(pg_base, logical=True).start()
    worker = None
    try:
        pg.create_database("shop")
        worker = ConnectWorker(base / "connect", kafka.bootstrap).start()
        p = Pipeline(kafka, pg, worker, "shop", base)
        p.sql("create table orders (id bigint primary key, event_time timestamptz not null, "
              "customer text, amount int)")
        p.sql(f"create table warehouse {SINK_TABLE}")
        p.sql(f"create table mart {SINK_TABLE}")
        worker.put_connector("shop-cdc", debezium_postgres(pg, "shop", "shop", "public.orders"))
        worker.wait_running("shop-cdc")
        worker.put_connector("load-warehouse", sql_sink(
            p.jdbc, "warehouse", TOPIC, COLUMNS, envelope="debezium",
            **{"errors.tolerance": "all",
               "errors.deadletterqueue.topic.name": "warehouse.dlq",
               "errors.deadletterqueue.topic.replication.factor": 1,
               "errors.deadletterqueue.context.headers.enable": "true"}))
        worker.put_connector("load-mart", sql_sink(
            p.jdbc, "mart", TOPIC, COLUMNS, envelope="debezium",
            **{"errors.tolerance": "all", "errors.log.enable": "true"}))
        worker.wait_running("load-warehouse")
        worker.wait_running("load-mart")
        # the window's rows, captured live; both sinks load all but the poison
        p.start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
        for i in range(1, ROWS + 1):
            p.sql("insert into orders values (%s, %s, %s, %s)", i,
                  p.start + timedelta(milliseconds=100 * i), None if i in POISON else f"c{i}",
                  i)
        p.end = p.start + timedelta(seconds=10)
        p.wait_rows("warehouse", ROWS - len(POISON))
        p.wait_rows("mart", ROWS - len(POISON))
        # the flows' window closes 15 s (their grace) after its end
        time.sleep(max(0.0, (p.end + timedelta(seconds=16) - datetime.now(UTC))
                       .total_seconds()))
        yield p
    finally:
        if worker is not None:
            worker.stop()
        pg.stop()
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(pg_base, ignore_errors=True)


def _config(p: Pipeline, tmp: Path, kafka_conn: str | None = None) -> Path:
    connect = p.worker.url
    kafka_at = f'conn: "{kafka_conn}"' if kafka_conn else f'bootstrap: "{p.kafka.bootstrap}"'
    ids = "select id, event_time from {t} where event_time >= :start and event_time < :end"
    flows = ""
    for flow, table, connector in (("warehouse_flow", "warehouse", "load-warehouse"),
                                   ("mart_flow", "mart", "load-mart"),
                                   ("strict_flow", "strict", "load-strict")):
        flows += f"""
  {flow}:
    owners: [data-platform@example.com]
    grace: 15s
    disorder: 5s
    replays: 1
    record: {{id: "$.id", event_time: "$.event_time", envelope: debezium}}
    tiers:
      - name: orders
        type: sql
        conn: "{p.url}"
        ids: "{ids.format(t='orders')}"
      - name: cdc
        type: kafka
        {kafka_at}
        topic: shop.public.orders
        connector: {{name: shop-cdc, url: "{connect}"}}
      - name: {table}
        type: sql
        conn: "{p.url}"
        ids: "{ids.format(t=table)}"
        connector: {{name: {connector}, url: "{connect}"}}
"""
    path = tmp / "flows.yaml"
    path.write_text("flows:" + flows)
    return path


def _ids(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def _run(p: Pipeline, spark: Any, config: Path, flow: str, out: Path) -> tuple[Any, Any]:
    run = orchestrate.load(flow, p.start.isoformat(), p.end.isoformat(), config, out)
    return run, orchestrate.execute(run, spark, with_report=False)


def test_a_connector_pipeline_reports_dead_lettered_ids_apart_from_records_skipped(
        pipeline: Pipeline, spark: Any, tmp_path: Path) -> None:
    from confluent_kafka import Producer

    p = pipeline
    # a record in the queue whose id cannot be read (not JSON), stamped inside the window
    producer = Producer({"bootstrap.servers": p.kafka.bootstrap})
    producer.produce("warehouse.dlq", value=b"\x00not json",
                     timestamp=int((p.start + timedelta(seconds=2)).timestamp() * 1000))
    assert producer.flush(30) == 0
    config = _config(p, tmp_path)
    results = {flow: _run(p, spark, config, flow, tmp_path / flow)
               for flow in ("warehouse_flow", "mart_flow")}

    # the sink with a dead-letter queue: the poison records are dead-lettered, not lost
    run, r = results["warehouse_flow"]
    assert r.status == "findings", r.verdict()
    kinds = {(f.kind, f.hop): f for f in r.record_findings}
    assert set(kinds) == {("dead_lettered", "cdc->warehouse"),
                          ("unidentifiable", "cdc->warehouse")}, r.verdict()
    unreadable = kinds[("unidentifiable", "cdc->warehouse")]
    assert unreadable.count == 1 and unreadable.topic == "warehouse.dlq"
    [row] = _ids(run.folder.path / str(unreadable.ids))
    assert row["partition"] == "0" and row["offset"].isdigit() and "no readable id" in \
        row["reason"]
    dead = kinds[("dead_lettered", "cdc->warehouse")]
    assert dead.count == len(POISON) and dead.side == "consume" and dead.topic == "warehouse.dlq"
    hop = next(h for h in r.hops if h.name == "cdc->warehouse")
    assert (hop.missing, hop.dead_lettered, hop.expected) == (0, 3, ROWS)
    rows = _ids(run.folder.path / str(dead.ids))
    assert sorted(int(x["id"]) for x in rows) == sorted(POISON)
    assert {x["error"] for x in rows} == {"org.postgresql.util.PSQLException"}
    assert all("not-null constraint" in x["message"] and x["topic"] == "shop.public.orders"
               and x["offset"].isdigit() for x in rows)
    assert dead.cause is not None and not isinstance(dead.cause, str)
    assert dead.cause.code == "dead_letter_queue" and dead.cause.confidence == "likely"
    assert "PSQLException" in dead.cause.summary
    assert not dead.within_tolerance  # dead-lettered records fail the window by default
    assert r.subject().startswith("FINDINGS warehouse_flow: 3 dead-lettered")
    # the snapshots and the audit: the topic's source connector and both ends' configs
    snaps = (run.folder.path / "connectors.json").read_text()
    assert '"load-warehouse"' in snaps and '"shop-cdc"' in snaps and "RUNNING" in snaps
    rules = {f.rule for f in r.risks}
    assert {"K3-resnapshot", "K4-no-heartbeat"} <= rules and "K1-tolerance-without-dlq" \
        not in rules
    # the suite fails the window as the verdict does, and the report says what and why
    validation = orchestrate.validate(run)
    assert not validation.success
    said = [f.words for s in validation.suites.values() for f in s.failed]
    assert "cdc->warehouse: 3 records dead-lettered, 0 allowed" in said, said
    orchestrate.report(run)
    text = (run.folder.path / "report.txt").read_text()
    assert "3 records routed to a dead-letter queue" in text and "PSQLException" in text
    assert "dead-lettered at cdc->warehouse: 3 record(s)" in text, text
    assert meaningless(run.folder.path) == []

    # the sink that skips: the same records are lost on the consume side, and why
    run, r = results["mart_flow"]
    kinds = {(f.kind, f.hop): f for f in r.record_findings}
    assert set(kinds) == {("loss", "cdc->mart")}, r.verdict()
    lost = kinds[("loss", "cdc->mart")]
    assert lost.count == len(POISON) and lost.side == "consume"
    assert sorted(int(x["id"]) for x in _ids(run.folder.path / str(lost.ids))) == sorted(POISON)
    assert lost.cause is not None and not isinstance(lost.cause, str)
    assert lost.cause.code == "skipped_by_error_tolerance", lost.cause
    assert lost.cause.confidence == "likely"
    assert "K1-tolerance-without-dlq" in {f.rule for f in r.risks}


def test_check_names_a_failed_connector_task_and_a_loss_after_it_has_that_cause(
        pipeline: Pipeline, spark: Any, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A sink with errors.tolerance=none stops at the first record it cannot write: its task
    FAILS, `check` says so and exits 2, and the window's records it never loaded are a loss
    whose cause is the failed task, not a mystery."""
    from kafka_recon.faces.cli import main

    p = pipeline
    p.sql(f"create table strict {SINK_TABLE}")
    p.worker.put_connector("load-strict", sql_sink(p.jdbc, "strict", TOPIC, COLUMNS,
                                                   envelope="debezium"))
    p.worker.wait_state("load-strict", "FAILED")
    config = _config(p, tmp_path)
    capsys.readouterr()
    code = main(["check", "--config", str(config), "--flow", "strict_flow",
                 "--start", p.start.isoformat(), "--end", p.end.isoformat()])
    out = capsys.readouterr().out
    assert code == 2, out
    line = next(x for x in out.splitlines() if "load-strict" in x)
    assert "error: strict: sink connector 'load-strict'" in line and "task 0 FAILED" in line
    assert "org.apache.kafka.connect.errors.ConnectException" in line, line
    # the source and the healthy sinks check as running
    code = main(["check", "--config", str(config), "--flow", "warehouse_flow",
                 "--start", p.start.isoformat(), "--end", p.end.isoformat()])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "source connector 'shop-cdc'" in out and "RUNNING; task 0 RUNNING" in out
    assert "dead-letter queue 'warehouse.dlq'" in out

    run, r = _run(p, spark, config, "strict_flow", tmp_path / "strict")
    lost = next(f for f in r.record_findings if f.kind == "loss")
    assert lost.hop == "cdc->strict" and lost.count == p.sql("select count(*) from orders")[0][0]
    assert lost.cause is not None and not isinstance(lost.cause, str)
    assert lost.cause.code == "connector_task_failed", lost.cause
    assert any("task 0 FAILED" in e for e in lost.cause.evidence)
    assert "K7-task-failed" in {f.rule for f in r.risks}


def test_a_principal_that_may_not_read_the_dead_letter_queue_is_told_before_the_run(
        pipeline: Pipeline, spark: Any, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Over SASL_SSL as the least-privilege principal: without READ and DESCRIBE on the sink's
    dead-letter queue, its records would be reported lost; the stage step names the ACL
    instead, and with it granted the queue is read over the same listener."""
    import json
    import uuid

    from harness.services.kafka_security import grant, reader_acls
    from kafka_recon.errors import TopicError

    p = pipeline
    assert p.kafka.security is not None
    conn = f"kafka_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn.upper()}", json.dumps(
        {"conn_type": "kafka", "extra": p.kafka.security.sasl(p.kafka.sasl_bootstrap)}))
    grant(p.kafka.bootstrap, "recon", reader_acls(TOPIC, []))
    config = _config(p, tmp_path, kafka_conn=conn)
    run = orchestrate.load("warehouse_flow", p.start.isoformat(), p.end.isoformat(), config,
                           tmp_path / "denied")
    with pytest.raises(TopicError, match=r"lacks 1 ACL\(s\) to read connector "
                                         r"'load-warehouse''s dead-letter queue: DESCRIBE on "
                                         r"Topic:warehouse.dlq"):
        orchestrate.stage(run)
    grant(p.kafka.bootstrap, "recon", [("TOPIC", "warehouse.dlq", "LITERAL", op)
                                       for op in ("READ", "DESCRIBE")])
    _, r = _run(p, spark, config, "warehouse_flow", tmp_path / "granted")
    dead = next(f for f in r.record_findings if f.kind == "dead_lettered")
    assert dead.count == len(POISON) and not any(f.kind == "loss" for f in r.record_findings)
