"""The replay job counts a topic exactly through Spark's official Kafka source (spark-submit)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from harness.services.kafka import KafkaCluster
from kafka_recon.settings import REPO_ROOT, spark_jars

pytestmark = pytest.mark.integration

START = datetime(2026, 11, 20, tzinfo=UTC)
END = START + timedelta(days=1)

FLOW = """
flows:
  t:
    owners: [x@example.com]
    grace: 10m
    replays: 2
    record: {{id: "$.id", event_time: "$.ts"}}
    tiers:
      - {{name: up, type: sql, conn: "sqlite:///unused.db",
         ids: "SELECT id, ts AS event_time FROM t WHERE ts >= :start AND ts < :end"}}
      - {{name: topic, type: kafka, bootstrap: "{bootstrap}", topic: "{topic}"}}
"""


def ms(t: datetime) -> int:
    return int(t.timestamp() * 1000)


def test_replay_counts_window_records_exactly(kafka: KafkaCluster, tmp_path: Path) -> None:
    topic = f"replay-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for fut in admin.create_topics([NewTopic(topic, 3, 1)]).values():
        fut.result(30)
    p = Producer({"bootstrap.servers": kafka.bootstrap, "acks": "all"})

    def send(rec_id: int | None, t: datetime, partition: int, raw: str | None = None) -> None:
        value = raw if raw is not None else json.dumps(
            {"id": rec_id, "ts": t.strftime("%Y-%m-%dT%H:%M:%SZ")})
        p.produce(topic, value=value, timestamp=ms(t), partition=partition)

    send(9000, START - timedelta(hours=2), 0)                # before the window, first: not read
    for i in range(1, 301):
        send(i, START + timedelta(minutes=i), i % 3)
    send(7, START + timedelta(hours=5), 1)                   # a duplicate of id 7
    send(None, START + timedelta(hours=6), 2, raw="not json")  # unidentifiable
    # Out of order (CreateTime): offsets by timestamp cannot exclude it, the event-time filter does
    send(9001, START - timedelta(hours=1), 0)
    send(9002, END + timedelta(minutes=5), 1)                # in grace, event after the window
    send(9003, END + timedelta(hours=2), 2)                  # after grace: not read
    assert p.flush(30) == 0

    config = tmp_path / "flows.yaml"
    config.write_text(FLOW.format(bootstrap=kafka.bootstrap, topic=topic))
    out = tmp_path / "run"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]",
         "--jars", ",".join(spark_jars()), "--conf", "spark.ui.enabled=false",
         str(REPO_ROOT / "spark_jobs" / "replay.py"), "--config", str(config), "--flow", "t",
         "--start", START.isoformat(), "--end", END.isoformat(), "--out", str(out)],
        env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]

    replays = json.loads((out / "replays.json").read_text())
    assert len(replays["replays"]) == 2
    groups = {r["group"] for r in replays["replays"]}
    assert len(groups) == 2, "each replay has its own fresh consumer group"
    for r in replays["replays"]:
        assert r["read"] == 300 + 4               # window, duplicate, bad value, 9001, 9002
        assert r["count"] == 301                  # the window's records, duplicate included
        assert r["distinct"] == 300
        assert r["unidentifiable"] == 1
    assert len({r["fingerprint"] for r in replays["replays"]}) == 1
    assert replays["estimate"] == 304             # offsets say 304: an estimate, not the verdict
    assert [(o["partition"], o["start"]) for o in replays["offsets"]] == [(0, 1), (1, 0), (2, 0)]
