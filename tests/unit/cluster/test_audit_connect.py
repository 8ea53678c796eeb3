"""The audit's Kafka Connect rules, read off a connector's config and tasks as
connectors.json keeps them; each links the documentation it comes from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafka_recon.cluster.audit import audit_connector
from kafka_recon.config import Flow, load_flow
from kafka_recon.runfiles.connectors import ConnectorSnapshot, TaskState, redacted

pytestmark = pytest.mark.unit

FLOW = """
flows:
  orders:
    owners: [a@example.com]
    record: {id: "$.id", event_time: "$.t", envelope: debezium}
    tiers:
      - {name: cdc, type: kafka, bootstrap: "b:9092", topic: shop.public.orders,
         connector: {name: shop-cdc, url: "http://c:8083"}}
      - {name: sink, type: sql, conn: sink_db, connector: {name: load, url: "http://c:8083"},
         ids: "SELECT id, t AS event_time FROM c WHERE t >= :start AND t < :end"}
"""


@pytest.fixture
def flow(tmp_path: Path) -> Flow:
    p = tmp_path / "flows.yaml"
    p.write_text(FLOW)
    return load_flow(p, "orders")


def snap(role: str, config: dict[str, str], tasks: list[dict[str, Any]] | None = None,
         **more: Any) -> ConnectorSnapshot:
    return ConnectorSnapshot(tier="cdc" if role == "source" else "sink",
                             name="shop-cdc" if role == "source" else "load",
                             cluster="http://c:8083", role=role, state="RUNNING",
                             config=config, tasks=[TaskState(**t) for t in tasks or [
                                 {"id": 0, "state": "RUNNING"}]], **more)


def rules(flow: Flow, s: ConnectorSnapshot) -> dict[str, Any]:
    return {r.rule: r for r in audit_connector(s, flow)}


SAFE_SINK = {"errors.tolerance": "all", "errors.deadletterqueue.context.headers.enable": "true"}
SAFE_SOURCE = {"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
               "snapshot.mode": "no_data", "heartbeat.interval.ms": "10000"}


def test_safe_connectors_fire_no_rule(flow: Flow) -> None:
    assert rules(flow, snap("sink", SAFE_SINK, dead_letter_topic="q")) == {}
    assert rules(flow, snap("sink", {})) == {}  # errors.tolerance=none: stops, never skips
    assert rules(flow, snap("source", SAFE_SOURCE)) == {}


@pytest.mark.parametrize(("role", "config", "queue", "rule", "severity"), [
    ("sink", {"errors.tolerance": "all"}, None, "K1-tolerance-without-dlq", "high"),
    ("sink", {"errors.tolerance": "all"}, "q", "K2-dlq-without-context", "medium"),
    ("sink", {"consumer.override.enable.auto.commit": "true"}, None, "K5-sink-auto-commit",
     "high"),
    ("sink", {"consumer.override.auto.offset.reset": "latest"}, None, "K6-sink-reset-latest",
     "medium"),
    ("source", {**SAFE_SOURCE, "snapshot.mode": "always"}, None, "K3-resnapshot", "medium"),
    ("source", {k: v for k, v in SAFE_SOURCE.items() if k != "snapshot.mode"}, None,
     "K3-resnapshot", "low"),
    ("source", {**SAFE_SOURCE, "heartbeat.interval.ms": "0"}, None, "K4-no-heartbeat", "low"),
])
def test_each_connect_rule_fires_on_its_risky_setting(flow: Flow, role: str,
                                                      config: dict[str, str],
                                                      queue: str | None, rule: str,
                                                      severity: str) -> None:
    found = rules(flow, snap(role, config, dead_letter_topic=queue))
    assert set(found) == {rule}
    r = found[rule]
    assert r.severity == severity and r.kind == "config_risk"
    assert r.side == ("consume" if role == "sink" else "write")
    assert r.topic == "shop.public.orders" and r.docs and r.docs.startswith("https://")
    assert ("debezium.io" in r.docs) == rule.startswith(("K3", "K4"))


def test_a_failed_task_is_a_health_risk_naming_its_trace(flow: Flow) -> None:
    found = rules(flow, snap("sink", {}, tasks=[
        {"id": 0, "state": "FAILED", "trace": "java.sql.SQLException: gone\n\tat x"}]))
    r = found["K7-task-failed"]
    assert r.kind == "health" and r.observed == "task 0 FAILED: java.sql.SQLException: gone"
    assert "POST /connectors/load/tasks/0/restart" in str(r.fix)


def test_a_connectors_secrets_are_not_kept() -> None:
    kept = redacted({"database.password": "s3cret", "database.user": "u",
                     "consumer.override.sasl.jaas.config": "x required password=p"})
    assert kept == {"consumer.override.sasl.jaas.config": "[hidden]",
                    "database.password": "[hidden]", "database.user": "u"}
