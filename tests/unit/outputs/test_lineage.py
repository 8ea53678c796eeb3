"""How a run's lineage names the flow's tiers and its result (OpenLineage's dataset names)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_recon.config import load_flow
from kafka_recon.outputs.lineage import LineageDataset, of_run

pytestmark = pytest.mark.unit

FLOW = """
flows:
  orders:
    owners: [a@example.com]
    record: {id: "$.id", event_time: "$.ts"}
    tiers:
      - {name: agent, type: flume, metrics_url: "http://10.0.0.5:41414/metrics",
         source: r1, sink: k1}
      - {name: db, type: sql, conn: "sqlite:///DB",
         counts: "SELECT COUNT(*) AS n FROM orders WHERE t >= :start AND t < :end"}
      - {name: topic, type: kafka, bootstrap: "b1:9093, b2:9093", topic: orders.v1}
      - {name: mirrored, type: kafka, bootstrap: "c1:9092", topic: dc1.orders.v1,
         via: replication}
      - {name: sink, type: sql, conn: "SINK",
         ids: "SELECT o.id, o.t AS event_time FROM shop.orders_out o JOIN items i ON i.o = o.id
               WHERE o.t >= :start AND o.t < :end"}
"""


def flow(tmp_path: Path, sink: str = "postgresql://u:secret@pg.local:6543/warehouse") -> object:
    p = tmp_path / "flows.yaml"
    p.write_text(FLOW.replace("DB", str(tmp_path / "up.db")).replace("SINK", sink))
    return load_flow(p, "orders")


def test_every_tier_is_an_input_named_as_openlineage_names_it_and_the_result_the_output(
        tmp_path: Path) -> None:
    lineage = of_run(flow(tmp_path), tmp_path / "run" / "result.json")  # type: ignore[arg-type]
    assert lineage.inputs == (
        LineageDataset("flume://10.0.0.5:41414", "r1/k1", "agent"),
        LineageDataset(f"sqlite:{tmp_path / 'up.db'}", "orders", "db"),
        LineageDataset("kafka://b1:9093", "orders.v1", "topic"),
        LineageDataset("kafka://c1:9092", "dc1.orders.v1", "mirrored"),
        # every table the query reads; unqualified is PostgreSQL's default schema
        LineageDataset("postgres://pg.local:6543", "warehouse.public.items", "sink"),
        LineageDataset("postgres://pg.local:6543", "warehouse.shop.orders_out", "sink"))
    assert lineage.outputs == (
        LineageDataset("file", str(tmp_path / "run" / "result.json"), "result"),)
    assert lineage.skipped == ()
    assert "secret" not in repr(lineage), "a password never reaches a dataset's name"


def test_a_tier_whose_connection_cannot_be_resolved_is_left_out_and_named_not_fatal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW_CONN_NOWHERE", raising=False)
    lineage = of_run(flow(tmp_path, sink="nowhere"), None)  # type: ignore[arg-type]
    assert [d.tier for d in lineage.inputs] == ["agent", "db", "topic", "mirrored"]
    assert lineage.outputs == ()
    [line] = lineage.skipped
    assert line.startswith("tier 'sink': connection 'nowhere'"), line


@pytest.mark.parametrize(("transport", "handed", "noted"), [
    ({"type": "file", "log_file_path": "/l/ol.jsonl", "append": True},
     {"spark.openlineage.transport.type": "file",
      "spark.openlineage.transport.location": "/l/ol.jsonl"}, False),
    ({"type": "file", "log_file_path": "/l/ol"},  # Airflow writes one file per event there
     {"spark.openlineage.transport.type": "file",
      "spark.openlineage.transport.location": "/l/ol.spark.jsonl"}, False),
    ({"type": "console"}, {"spark.openlineage.transport.type": "console"}, False),
    ({"type": "http", "url": "http://marquez:5000"}, {}, False),  # the Spark provider hands it
    ({"type": "composite", "transports": [{"type": "http", "url": "http://m"}]}, {}, False),
    ({"type": "kafka", "topic": "ol"}, {}, True)])
def test_the_spark_listener_is_on_and_sent_where_airflow_sends_or_says_it_cannot(
        transport: dict[str, object], handed: dict[str, str], noted: bool) -> None:
    from kafka_recon.outputs.lineage import LISTENER, listener_conf

    conf, note = listener_conf(transport, "ns", "-Duser.timezone=UTC")
    assert conf["spark.extraListeners"] == LISTENER
    assert conf["spark.openlineage.namespace"] == "ns"
    assert conf["spark.driver.extraJavaOptions"].startswith("-Duser.timezone=UTC --add-opens")
    assert {k: v for k, v in conf.items() if ".transport." in k} == handed
    assert (note is not None) == noted
    if note:
        assert "'kafka' cannot be handed to Spark" in note


def test_an_http_transport_s_api_key_is_found_to_mask_and_redacted_by_spark() -> None:
    import re

    from kafka_recon.outputs.lineage import listener_conf, transport_secrets

    transport = {"type": "composite", "transports": [
        {"type": "http", "url": "https://ol.example", "auth": {"type": "api_key",
                                                              "apiKey": "k-123"}},
        {"type": "kafka", "config": {"sasl.password": "p-456", "bootstrap.servers": "b:9092"}}]}
    assert transport_secrets(transport) == ["k-123", "p-456"]
    assert transport_secrets({"type": "file", "log_file_path": "/l"}) == []
    regex = listener_conf({"type": "http"}, "ns", "")[0]["spark.redaction.regex"]
    assert re.search(regex.replace("(?i)", ""), "spark.openlineage.transport.auth.apiKey",
                     re.IGNORECASE)


def test_with_an_http_transport_the_spark_task_turns_the_listener_on_and_masks_the_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Spark provider hands an http transport to Spark on the command line: kafka-recon
    asks it to, masks the key in the task's logs first and adds the listener jar."""
    from kafka_recon.airflow.operators import spark_submit

    masked: list[str] = []
    monkeypatch.setattr("airflow.sdk.log.mask_secret", masked.append)
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__TRANSPORT", json.dumps(
        {"type": "http", "url": "https://ol.example", "auth": {"type": "api_key",
                                                              "apiKey": "k-123"}}))
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__NAMESPACE", "platform")
    jar = tmp_path / "lineage" / "openlineage-spark_2.13-1.37.0.jar"
    jar.parent.mkdir()
    jar.write_bytes(b"")
    monkeypatch.setenv("KAFKA_RECON_JARS", str(tmp_path))
    op = spark_submit.ReconSparkSubmitOperator(
        task_id="replay_reconcile", step="replay_reconcile", flow="orders", config="unused.yaml",
        jars="/a.jar", conf={"spark.driver.extraJavaOptions": "-Duser.timezone=UTC"})
    op._spark_lineage()
    assert masked == ["k-123"]
    assert op.conf["spark.extraListeners"].endswith("OpenLineageSparkListener")
    assert op.conf["spark.openlineage.namespace"] == "platform"
    assert not [k for k in op.conf if ".transport." in k], "the provider injects http itself"
    assert op._openlineage_inject_transport_info and op._openlineage_inject_parent_job_info
    assert op.jars == f"/a.jar,{jar}"


def test_tables_and_mysql_are_named_as_openlineage_names_them(tmp_path: Path) -> None:
    p = tmp_path / "flows.yaml"
    p.write_text("""
flows:
  lake:
    owners: [a@example.com]
    record: {id: "$.id", event_time: "$.ts"}
    tiers:
      - {name: db, type: sql, conn: "mysql://u:secret@my.local:3307/shop",
         ids: "SELECT id, ts AS event_time FROM orders WHERE ts >= :start AND ts < :end"}
      - {name: topic, type: kafka, bootstrap: "b1:9093", topic: orders}
      - {name: ice, type: table, format: iceberg, table: lake.db.orders,
         catalog: {type: hadoop, warehouse: "s3a://wh/lake/"}}
      - {name: delta, type: table, format: delta, table: "s3://bucket/tables/orders"}
      - {name: files, type: table, format: parquet, table: "/data/orders"}
""")
    lineage = of_run(load_flow(p, "lake"), None)
    assert lineage.inputs == (
        LineageDataset("mysql://my.local:3307", "shop.orders", "db"),
        LineageDataset("kafka://b1:9093", "orders", "topic"),
        LineageDataset("s3a://wh/lake", "db.orders", "ice"),
        LineageDataset("s3://bucket", "tables/orders", "delta"),
        LineageDataset("file", "/data/orders", "files"))
