"""The flight recorder on the real (secured) broker: `kafka-recon snapshot` reads a topic's
partitions and a live group's members as the least-privilege principal, and the stage step
hands what it saw over a window to the causes."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from harness.services.kafka import KafkaCluster, StageProducer
from harness.services.kafka_security import grant, reader_acls
from kafka_recon.cluster import recorder
from kafka_recon.faces.cli import main

pytestmark = pytest.mark.integration

FLOW = """
flows:
  orders:
    owners: [o@example.com]
    record: {{id: "$.id", event_time: "$.ts"}}
    tiers:
      - {{name: topic, type: kafka, conn: "{conn}", topic: "{topic}", consumer_groups: [{group}]}}
      - {{name: sink, type: sql, conn: "sqlite:///unused.db", ids: "{ids}"}}
"""
IDS = "SELECT id, t AS event_time FROM s WHERE t >= :start AND t < :end"  # never run here


def test_snapshot_records_leaders_offsets_and_the_groups_live_members(
        tmp_path: Path, kafka: KafkaCluster, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    assert kafka.security is not None
    topic, group = f"rec-{uuid.uuid4().hex[:8]}", f"loader-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for fut in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        fut.result(30)
    grant(kafka.bootstrap, "recon", reader_acls(topic, [group]))  # nothing more
    monkeypatch.setenv("AIRFLOW_CONN_REC_KAFKA", json.dumps(
        {"conn_type": "kafka", "extra": kafka.security.sasl(kafka.sasl_bootstrap)}))
    config = tmp_path / "flows.yaml"
    config.write_text(FLOW.format(conn="rec_kafka", topic=topic, group=group,
                                  ids=IDS))
    p = StageProducer(kafka.bootstrap)
    for i in range(30):
        p.produce(topic, key=str(i), value=json.dumps({"id": i}), partition=i % 2)
    p.flush()
    # a production consumer, on its own client id, holding both partitions and committing
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group,
                  "client.id": "orders-loader", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got, deadline = 0, time.monotonic() + 60
    while got < 30 and time.monotonic() < deadline:
        got += len([m for m in c.consume(30, 1.0) if m.error() is None])
    c.commit(asynchronous=False)
    store = tmp_path / "snapshots.db"
    try:
        before = datetime.now(UTC)
        assert main(["snapshot", "--config", str(config), "--store", str(store)]) == 0
        assert main(["snapshot", "--config", str(config), "--store", str(store)]) == 0
    finally:
        c.close()
    out = capsys.readouterr().out
    assert f"orders/{topic}: 2 partition(s), 1 group(s)" in out

    con = sqlite3.connect(store)
    rows = con.execute("SELECT partition, leader, leader_epoch, isr, log_start, log_end, error "
                       "FROM partition_snapshot ORDER BY taken_at, partition").fetchall()
    assert [(r[0], r[3], r[4], r[5], r[6]) for r in rows[:2]] == [
        (0, "[1]", 0, 15, None), (1, "[1]", 0, 15, None)]
    assert all(r[1] == 1 and r[2] is not None and r[2] >= 0 for r in rows)
    committed, members = con.execute("SELECT committed, members FROM group_snapshot").fetchone()
    assert json.loads(committed) == {"0": 15, "1": 15}
    [m] = json.loads(members)
    assert (m["client_id"], m["partitions"]) == ("orders-loader", [0, 1])

    tl = recorder.timeline(recorder.connect(store), "orders", topic, before,
                           before + timedelta(seconds=1), margin=timedelta(minutes=1))
    assert tl.snapshots == 2 and tl.events == []
    assert [x.client_id for x in tl.members[group]] == ["orders-loader"]


def test_a_flow_whose_cluster_cannot_be_read_is_named_and_the_others_are_snapshotted(
        tmp_path: Path, kafka: KafkaCluster, capsys: pytest.CaptureFixture[str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"rec-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})  # held until the futures end
    for fut in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        fut.result(30)
    config = tmp_path / "flows.yaml"
    ids = IDS
    config.write_text(f"""
flows:
  gone:
    owners: [o@example.com]
    record: {{id: "$.id", event_time: "$.ts"}}
    tiers:
      - {{name: topic, type: kafka, bootstrap: "127.0.0.1:1", topic: t}}
      - {{name: sink, type: sql, conn: "sqlite:///unused.db", ids: "{ids}"}}
  here:
    owners: [o@example.com]
    record: {{id: "$.id", event_time: "$.ts"}}
    tiers:
      - {{name: topic, type: kafka, bootstrap: "{kafka.bootstrap}", topic: "{topic}"}}
      - {{name: sink, type: sql, conn: "sqlite:///unused.db", ids: "{ids}"}}
""")
    assert main(["snapshot", "--config", str(config), "--store",
                 str(tmp_path / "s.db")]) == 2
    captured = capsys.readouterr()
    assert f"here/{topic}: 1 partition(s)" in captured.out
    [line] = [x for x in captured.err.splitlines() if x.startswith("error:")]
    assert "flow 'gone'" in line and "127.0.0.1:1" in line


def test_every_topic_of_a_flow_is_snapshotted_and_an_unreachable_one_is_named(
        tmp_path: Path, kafka: KafkaCluster, capsys: pytest.CaptureFixture[str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    first, second = f"rec-{uuid.uuid4().hex[:8]}", f"rec-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for fut in admin.create_topics([NewTopic(first, 1, 1), NewTopic(second, 3, 1)]).values():
        fut.result(30)
    config = tmp_path / "flows.yaml"
    config.write_text(f"""
flows:
  chain:
    owners: [o@example.com]
    record: {{id: "$.id", event_time: "$.ts"}}
    tiers:
      - {{name: raw, type: kafka, bootstrap: "{kafka.bootstrap}", topic: "{first}"}}
      - {{name: enriched, type: kafka, bootstrap: "{kafka.bootstrap}", topic: "{second}",
         via: process}}
      - {{name: elsewhere, type: kafka, bootstrap: "127.0.0.1:1", topic: "{second}",
         via: replication}}
      - {{name: sink, type: sql, conn: "sqlite:///unused.db", ids: "{IDS}"}}
""")
    store = tmp_path / "s.db"
    before = datetime.now(UTC)
    assert main(["snapshot", "--config", str(config), "--store", str(store)]) == 2
    captured = capsys.readouterr()
    assert f"chain/{first}: 1 partition(s)" in captured.out
    assert f"chain/{second}: 3 partition(s)" in captured.out
    [line] = [x for x in captured.err.splitlines() if x.startswith("error:")]
    assert f"topic '{second}'" in line and "127.0.0.1:1" in line

    con = recorder.connect(store)
    window = (before, before + timedelta(seconds=1))
    assert recorder.timeline(con, "chain", first, *window).snapshots == 1
    assert recorder.timeline(con, "chain", second, *window).snapshots == 1
    # the mirrored copy keeps the name: its snapshots would be kept under its tier
    assert recorder.timeline(con, "chain", f"{second}@elsewhere", *window).snapshots == 0
