"""The dev environment runs real Kafka: a round trip, and a broker failure the ISR can see."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from harness.services.base import pid_alive
from harness.services.kafka import KafkaCluster, StageProducer

pytestmark = pytest.mark.integration


def create_topic(bootstrap: str, name: str, partitions: int, rf: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, partitions, rf)]).values():
        fut.result(30)


def test_single_node_round_trip_returns_every_record(kafka: KafkaCluster) -> None:
    topic = f"roundtrip-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap, topic, 2, 1)
    producer = StageProducer(kafka.bootstrap)
    sent = {f"r{i}" for i in range(500)}
    for v in sent:
        producer.produce(topic, value=v.encode())
    producer.flush()
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": topic,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: set[str] = set()
    deadline = time.monotonic() + 60
    while got != sent and time.monotonic() < deadline:
        for m in consumer.consume(500, timeout=1):
            if m.error() is None:
                got.add((m.value() or b"").decode())
    consumer.close()
    assert got == sent
    # a test broker is lean (harness.services.kafka): its group offsets in two partitions
    meta = AdminClient({"bootstrap.servers": kafka.bootstrap}).list_topics(timeout=10)
    assert len(meta.topics["__consumer_offsets"].partitions) == 2
    assert "-XX:TieredStopAtLevel=1" in Path(f"/proc/{kafka.describe()['nodes'][0]['pid']}"
                                             "/cmdline").read_text()


def isr(admin: AdminClient, topic: str) -> list[int]:
    return sorted(admin.list_topics(topic, timeout=10).topics[topic].partitions[0].isrs)


def wait_for(check, timeout: float = 90) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return True
        except Exception:  # noqa: BLE001 - metadata may be briefly unavailable during failover
            pass
        time.sleep(0.5)
    return False


def test_three_broker_cluster_isr_shrinks_on_kill_and_heals_on_restart(tmp_path: Path) -> None:
    cluster = KafkaCluster(tmp_path / "cluster", size=3,
                           broker_config={"replica.lag.time.max.ms": "5000"})
    cluster.start()
    pids = [n["pid"] for n in cluster.describe()["nodes"]]
    try:
        create_topic(cluster.bootstrap, "rf3", 1, 3)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        assert wait_for(lambda: isr(admin, "rf3") == [1, 2, 3])
        victim = 2
        cluster.kill(victim)
        assert cluster.running() == {1: True, 2: False, 3: True}
        assert wait_for(lambda: isr(admin, "rf3") == [1, 3]), isr(admin, "rf3")
        cluster.restart(victim)
        assert wait_for(lambda: isr(admin, "rf3") == [1, 2, 3]), isr(admin, "rf3")
    finally:
        cluster.stop()
    # stopped cleanly: no broker process of this cluster is left
    assert not any(pid_alive(p) for p in pids)
    assert not any(cluster.running().values())
