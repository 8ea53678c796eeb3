"""kafka-recon never changes the cluster it watches. On a broker that auto-creates topics (Kafka's
default, `auto.create.topics.enable=true`), a flow naming a topic the cluster does not have is
checked, snapshotted, audited and run, and its topic is read by the window reader: afterwards
the cluster's topics, their configs and every consumer group's committed offsets are exactly
what they were, and the run is inconclusive naming the missing topic, never a loss."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness.services.kafka import KafkaCluster
from tests.integration.engine_harness import END, START, Scenario, commit_offset

pytestmark = pytest.mark.integration

KAFKA_RECON = Path(sys.executable).parent / "kafka-recon"
N = 10


def cluster_state(bootstrap: str) -> dict[str, Any]:
    """What a watcher must leave as it was: every topic with its partitions and its configs
    (as the broker reports them, defaults included), and every consumer group's committed
    offsets (of each group that has any), read through the platform's own (super user's)
    listener."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = admin.list_topics(timeout=15).topics
    state: dict[str, Any] = {"topics": {}, "groups": {}}
    for name, md in sorted(topics.items()):
        res = ConfigResource(ResourceType.TOPIC, name)
        configs = admin.describe_configs([res])[res].result(15)
        state["topics"][name] = {"partitions": len(md.partitions),
                                 "configs": {k: e.value for k, e in configs.items()}}
    groups = admin.list_consumer_groups().result(15).valid
    for g in sorted(x.group_id for x in groups):
        [fut] = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(g)]).values()
        # a group that committed nothing is the broker's to forget (an empty group of an
        # earlier test's consumer expired between the two reads once): only commits count
        if committed := sorted((tp.topic, tp.partition, tp.offset)
                               for tp in fut.result(15).topic_partitions):
            state["groups"][g] = committed
    return state


def recon(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KAFKA_RECON), *args], capture_output=True, text=True,
                          timeout=300, check=False, env=os.environ.copy())


@pytest.fixture
def missing_topic_flow(tmp_path: Path, kafka: KafkaCluster) -> tuple[Scenario, str, Path]:
    """A working pipeline (its topic, its loader group's commits) and a config whose flow
    'renamed' names a topic the cluster does not have, beside the working flow 'f'."""
    scn = Scenario(tmp_path, kafka.bootstrap, groups=["loader"])
    scn.flow_through(N)
    for p in range(scn.partitions):
        commit_offset(kafka.bootstrap, "loader", scn.topic, p, 1)
    missing = f"renamed-{uuid.uuid4().hex[:8]}"
    body = scn.config.read_text().split("  f:\n", 1)[1]
    config = tmp_path / "two.yaml"
    config.write_text("flows:\n  f:\n" + body + "  renamed:\n"
                      + body.replace(f'topic: "{scn.topic}"', f'topic: "{missing}"'))
    assert f'topic: "{missing}"' in config.read_text()
    return scn, missing, config


def test_a_flow_naming_a_missing_topic_changes_nothing_on_the_cluster_and_is_inconclusive(
        missing_topic_flow: tuple[Scenario, str, Path], kafka: KafkaCluster,
        tmp_path: Path) -> None:
    scn, missing, config = missing_topic_flow
    before = cluster_state(kafka.bootstrap)
    assert missing not in before["topics"] and "loader" in before["groups"]

    window = ["--start", START.isoformat(), "--end", END.isoformat()]
    checked = recon("check", "--config", str(config), "--flow", "renamed", *window)
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert f"topic '{missing}' does not exist on the cluster" in checked.stdout

    snapped = recon("snapshot", "--config", str(config), "--store",
                    f"sqlite:///{tmp_path / 'snapshots.db'}")
    # the working flow's topic is snapshotted, the missing one named; neither stops the other
    assert snapped.returncode == 2, snapped.stdout + snapped.stderr
    assert f"f/{scn.topic}" in snapped.stdout
    assert f"topic '{missing}'" in snapped.stderr and "does not exist" in snapped.stderr

    audited = recon("audit", "--config", str(config), "--flow", "renamed")
    assert audited.returncode == 2 and "does not exist" in audited.stderr, audited.stderr

    out = tmp_path / "run"
    ran = recon("run", "--config", str(config), "--flow", "renamed", *window,
                "--out", str(out))
    assert ran.returncode == 2, ran.stdout + ran.stderr
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "inconclusive" and not result["findings"], result
    [reason] = result["reasons"]
    assert f"topic '{missing}' does not exist on the cluster" in reason, reason

    assert cluster_state(kafka.bootstrap) == before


def test_the_window_reader_never_has_a_topic_created_by_reading_it(
        kafka: KafkaCluster, spark: Any) -> None:
    # the reader's own consumer, given nothing but the bootstrap: the Java client's default
    # would let the broker create the topic it is assigned
    from kafka_recon.spark.replay import READER

    missing = f"never-{uuid.uuid4().hex[:8]}"
    before = cluster_state(kafka.bootstrap)
    frame = (spark.read.format(READER)
             .option("kafka.bootstrap.servers", kafka.bootstrap)
             .option("topic", missing).option("ranges", "0:0:1")
             .option("groupId", f"kafka-recon-test-{uuid.uuid4().hex[:6]}")
             .option("pollTimeoutMs", "4000").load())
    with pytest.raises(Exception):  # noqa: B017, PT011 - Spark's wrapper of the task's failure
        frame.count()
    assert cluster_state(kafka.bootstrap) == before
