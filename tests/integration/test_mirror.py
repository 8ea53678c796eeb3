"""A flow mirrored by a real MirrorMaker 2 (dedicated mode, connect-mirror 4.2.0) from the
session's cluster (alias A) to a second KRaft cluster (alias B): the replication hop is
reconciled id by id, a mirror killed and restarted mid-stream shows as duplicates of that hop
only, and the mirror's own settings are audited from its mm2.properties."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.services.kafka import KafkaCluster
from harness.services.mirror import MirrorMaker2, mirrored, wait_mirrored
from tests.integration.engine_harness import Scenario, at, findings

pytestmark = pytest.mark.integration

ROWS = {i: at(i * 4) for i in range(1, 301)}  # 300 records over the first 20 hours

TIER = """      - name: mirrored
        type: kafka
        via: replication
        bootstrap: "{bootstrap}"
        topic: "{topic}"
        mirror_properties: "{properties}"
"""


@pytest.fixture(scope="module")
def cluster_b(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """The aggregate cluster: a second single-broker KRaft cluster on loopback."""
    cluster = KafkaCluster(tmp_path_factory.mktemp("cluster-b") / "b", size=1).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def mirror_flow(kafka: KafkaCluster, cluster_b: KafkaCluster, tmp_path: Path
                ) -> Iterator[tuple[Scenario, Any]]:
    scn = Scenario(tmp_path, kafka.bootstrap)
    # commit the mirror's source offsets only every 10 minutes: a kill loses all it copied
    mm2 = MirrorMaker2(tmp_path / "mm2", kafka.bootstrap, cluster_b.bootstrap, scn.topic,
                       {"offset.flush.interval.ms": 600_000})
    text = scn.config.read_text()
    at_sink = text.index("      - name: sink")
    scn.config.write_text(text[:at_sink] + TIER.format(
        bootstrap=cluster_b.bootstrap, topic=mirrored(scn.topic),
        properties=mm2.properties) + text[at_sink:])
    yield scn, mm2
    mm2.stop()


def test_a_real_mirrormaker_2_that_copied_everything_leaves_the_replication_hop_clean(
        mirror_flow: tuple[Scenario, Any], cluster_b: KafkaCluster, spark: Any) -> None:
    scn, mm2 = mirror_flow
    scn.upstream(ROWS)
    scn.produce(list(ROWS.items()))
    mm2.start()
    wait_mirrored(cluster_b.bootstrap, mirrored(scn.topic), len(ROWS), mirror=mm2)
    scn.sink(list(ROWS.items()))
    r = scn.reconcile(spark)
    assert findings(r) == []
    assert [(h["from"], h["to"], h["side"], h["expected"], h["observed"]) for h in r["hops"]
            ] == [("db", "topic", "write", 300, 300),
                  ("topic", "mirrored", "replication", 300, 300),
                  ("mirrored", "sink", "consume", 300, 300)]
    # the loopback mirror makes single-replica topics and syncs no group offsets: said, on the
    # replication side, never as loss
    risks = {f["rule"]: f for f in r["findings"] if f["kind"] == "config_risk"
             and f["rule"].startswith("M")}
    assert set(risks) == {"M4-mirror-replication-factor", "M5-offset-translation"}
    assert {f["side"] for f in risks.values()} == {"replication"}
    assert r["status"] == "ok"


def test_a_mirror_killed_and_restarted_mid_stream_duplicates_on_the_replication_hop_only(
        mirror_flow: tuple[Scenario, Any], cluster_b: KafkaCluster, spark: Any) -> None:
    scn, mm2 = mirror_flow
    first = dict(list(ROWS.items())[:200])
    scn.upstream(ROWS)
    scn.produce(list(first.items()))
    mm2.start()
    wait_mirrored(cluster_b.bootstrap, mirrored(scn.topic), len(first), mirror=mm2)
    mm2.kill()  # before its first offset commit: it will copy the first 200 again
    scn.produce([(i, t) for i, t in ROWS.items() if i not in first])
    mm2.start()
    wait_mirrored(cluster_b.bootstrap, mirrored(scn.topic), len(first) + len(ROWS), mirror=mm2)
    scn.sink(list(ROWS.items()))
    r = scn.reconcile(spark)
    assert findings(r) == [("duplicate", "replication", "topic->mirrored", 200)]
    dup = next(f for f in r["findings"] if f["kind"] == "duplicate")
    assert scn.ids(dup["ids"]) == set(first)
    assert dup["cause"]["code"] == "resent_after_restart"
    # the sink read the mirrored topic's copies as one record each: no consume-side finding
    assert r["hops"][2]["duplicate"] == 0 and r["hops"][2]["missing"] == 0


def test_the_mirrors_progress_is_read_from_its_offset_store(
        kafka: KafkaCluster, cluster_b: KafkaCluster, tmp_path: Path) -> None:
    """What `kafka-recon snapshot` and the replay record as group 'mirror A->B': the next
    source offset per partition, from Connect's offset store on the target cluster."""
    from harness.drill.faults import wait_for
    from harness.services.mirror import SOURCE
    from kafka_recon.cluster.mirror import progress
    from kafka_recon.sources.kafka_client import KafkaEndpoint

    scn = Scenario(tmp_path, kafka.bootstrap)
    scn.produce(list(ROWS.items()))
    mm2 = MirrorMaker2(tmp_path / "mm2", kafka.bootstrap, cluster_b.bootstrap, scn.topic,
                       {"offset.flush.interval.ms": 1000}).start()
    try:
        wait_mirrored(cluster_b.bootstrap, mirrored(scn.topic), len(ROWS), mirror=mm2)
        done = wait_for("the mirror to commit all it copied", lambda: (p := progress(
            KafkaEndpoint(cluster_b.bootstrap), f"mm2-offsets.{SOURCE}.internal", SOURCE,
            scn.topic)) and sum(p.values()) == len(ROWS) and p, 90)
    finally:
        mm2.stop()
    assert sorted(done) == list(range(scn.partitions))
