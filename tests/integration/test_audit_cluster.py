"""The audit against a real three-broker KRaft cluster: each risk appears, and clears."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from harness.services.kafka import KafkaCluster, StageProducer
from kafka_recon.cluster.audit import audit_flow
from kafka_recon.config import load_flow
from kafka_recon.runfiles.audit import Risk
from tests.integration.engine_harness import commit_offset

pytestmark = pytest.mark.integration

SAFE_TOPIC = {"min.insync.replicas": "2", "unclean.leader.election.enable": "false"}
SAFE_PRODUCER = {"acks": "all", "enable.idempotence": True, "retry.backoff.ms": 1000}
SAFE_CONSUMER = {"enable.auto.commit": False, "max.partition.fetch.bytes": 2097152}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    c = KafkaCluster(tmp_path_factory.mktemp("audit-cluster"), size=3,
                     broker_config={"replica.lag.time.max.ms": "5000"})
    c.start()
    yield c
    c.stop()


def topic(cluster: KafkaCluster, rf: int = 3, **config: str) -> str:
    name = f"audit-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    new = NewTopic(name, 2, rf, config={**SAFE_TOPIC, **config})
    for fut in admin.create_topics([new]).values():
        fut.result(30)
    return name


def audit(cluster: KafkaCluster, tmp_path: Path, name: str, producer: Any = None,
          consumer: Any = None, groups: list[str] | None = None,
          extra: str = "") -> list[Risk]:
    config = tmp_path / f"{name}.yaml"
    config.write_text(f"""
flows:
  f:
    owners: [o@example.com]
    record: {{id: "$.id", event_time: "$.ts"}}
    tiers:
      - {{name: db, type: sql, conn: "sqlite:///x.db",
         ids: "SELECT id, ts AS event_time FROM t WHERE ts >= :start AND ts < :end"}}
      - name: topic
        type: kafka
        bootstrap: "{cluster.bootstrap}"
        topic: "{name}"
        consumer_groups: {json.dumps(groups or [])}
        producer: {json.dumps(SAFE_PRODUCER if producer is None else producer)}
        consumer: {json.dumps(SAFE_CONSUMER if consumer is None else consumer)}
{extra}""")
    return audit_flow(load_flow(config, "f"), tmp_path).risks


def rules(found: list[Risk]) -> set[str]:
    return {f.rule for f in found}


def test_safe_topic_and_clients_give_no_finding(cluster: KafkaCluster, tmp_path: Path) -> None:
    assert audit(cluster, tmp_path, topic(cluster)) == []


@pytest.mark.parametrize(("rf", "config", "rule"), [
    (2, {"min.insync.replicas": "1"}, "T1-replication"),
    (3, {"min.insync.replicas": "1"}, "T2-min-isr"),
    (3, {"min.insync.replicas": "3"}, "T3-min-isr-equals-rf"),
    (3, {"unclean.leader.election.enable": "true"}, "T4-unclean-election"),
    (3, {"max.message.bytes": "4194304"}, "S1-size-chain"),
])
def test_each_unsafe_topic_setting_gives_its_finding(cluster: KafkaCluster, tmp_path: Path,
                                                     rf: int, config: dict[str, str],
                                                     rule: str) -> None:
    found = audit(cluster, tmp_path, topic(cluster, rf, **config))
    assert rule in rules(found)
    f = next(x for x in found if x.rule == rule)
    assert f.kind == "config_risk" and f.fix and f.seed


def wait_rules(check: Any, timeout: float = 60) -> set[str]:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if time.monotonic() > deadline or got[1]:
            return got[0]
        time.sleep(1)


def test_killed_broker_gives_replication_health_findings_that_clear(
        cluster: KafkaCluster, tmp_path: Path) -> None:
    name = topic(cluster, 3, **{"min.insync.replicas": "3"})
    health = {"H1-under-replicated", "H2-below-min-isr"}
    cluster.kill(3)
    try:
        got = wait_rules(lambda: (r := rules(audit(cluster, tmp_path, name)), health <= r))
        assert health <= got
        assert all(f.blocking for f in audit(cluster, tmp_path, name)
                   if f.rule == "H2-below-min-isr")
    finally:
        cluster.restart(3)
    got = wait_rules(lambda: (r := rules(audit(cluster, tmp_path, name)), not (health & r)), 90)
    assert not health & got


def test_group_lagging_past_retention_gives_the_retention_finding(
        cluster: KafkaCluster, tmp_path: Path) -> None:
    name = topic(cluster, 3, **{"retention.ms": str(2 * 3600 * 1000)})
    p = StageProducer(cluster.bootstrap)
    five_hours_ago = int(time.time() * 1000) - 5 * 3600 * 1000
    for i in range(5):
        p.produce(name, value=str(i), partition=0, timestamp=five_hours_ago + i)
    p.flush()
    commit_offset(cluster.bootstrap, f"{name}-loader", name, 0, 1)
    found = audit(cluster, tmp_path, name, groups=[f"{name}-loader"])
    (f,) = [x for x in found if x.rule == "R1-retention-vs-lag"]
    assert f.where == f"{name}-loader" and f.side == "consume"


def test_a_group_that_never_committed_is_read_without_crashing(
        cluster: KafkaCluster, tmp_path: Path) -> None:
    # AdminClient.list_consumer_group_offsets crashed the process for such a group
    found = audit(cluster, tmp_path, topic(cluster), groups=[f"never-{uuid.uuid4().hex[:6]}"])
    assert "R1-retention-vs-lag" not in rules(found)


def test_client_rules_from_declared_settings_and_a_properties_file(
        cluster: KafkaCluster, tmp_path: Path) -> None:
    (tmp_path / "consumer.properties").write_text("group.id=loader\nenable.auto.commit=true\n")
    name = topic(cluster)
    found = audit(cluster, tmp_path, name, producer={"acks": "1"}, consumer={},
                  extra="        consumer_properties: consumer.properties\n")
    assert {"P1-acks", "C1-auto-commit"} <= rules(found)


def test_audit_command_exits_1_on_a_high_severity_risk(cluster: KafkaCluster,
                                                       tmp_path: Path) -> None:
    name = topic(cluster, 3, **{"unclean.leader.election.enable": "true"})
    audit(cluster, tmp_path, name)  # writes the config file
    done = subprocess.run([str(Path(sys.executable).parent / "kafka-recon"), "audit",
                           "--config", str(tmp_path / f"{name}.yaml")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1, done.stderr
    assert "T4-unclean-election" in done.stdout and "high" in done.stdout
