"""The replay job counts a topic exactly through Spark's official Kafka source (spark-submit)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from harness.services.kafka import KafkaCluster, StageProducer
from kafka_recon.settings import REPO_ROOT, spark_jars

pytestmark = pytest.mark.integration

# two days back from today, never a fixed date: the broker's retention (7 days by default)
# deletes records whose timestamps are older, and a fixed date grows older every day
START = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=2)
END = START + timedelta(days=1)
AT = (START + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")  # a record's event time

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
    p = StageProducer(kafka.bootstrap)

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
    p.flush()

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

    [replays] = json.loads((out / "replays.json").read_text())["topics"]  # the one topic
    assert replays["tier"] == "topic" and len(replays["replays"]) == 2
    groups = {r["group"] for r in replays["replays"]}
    assert len(groups) == 2, "each replay has its own fresh consumer group"
    for r in replays["replays"]:
        # window, duplicate, bad value, 9001, 9002 (the offsets read say where any went)
        assert r["read"] == 300 + 4, replays["read_offsets"]
        assert r["count"] == 301                  # the window's records, duplicate included
        assert r["distinct"] == 300
        assert r["unidentifiable"] == 1
    assert len({r["fingerprint"] for r in replays["replays"]}) == 1
    assert replays["replays"][1]["same_records"] is True  # proven by digests, no second parse
    assert replays["estimate"] == 304             # offsets say 304: an estimate, not the verdict
    assert [(o["partition"], o["start"]) for o in replays["offsets"]] == [(0, 1), (1, 0), (2, 0)]


def _fill(bootstrap: str, topic: str, values: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        fut.result(30)
    p = StageProducer(bootstrap)
    for v in values:
        p.produce(topic, value=v, timestamp=ms(START + timedelta(hours=1)), partition=0)
    p.flush()


def test_a_later_replay_that_reads_what_the_first_did_is_proven_by_digests(
        kafka: KafkaCluster, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replay 2 sums its records' digests instead of reading their fields: equal to replay
    1's, it is summarised as replay 1; when the topic is replaced between the two reads (the
    same offsets, one value changed: deleted and re-created here, as an unclean leader
    election would rewrite it), the digests differ and replay 2 reads again and summarises
    its own ids, so the replays disagree and say so."""
    import time

    from kafka_recon.config import load_flow
    from kafka_recon.runfolder import RunFolder
    from kafka_recon.spark import replay as P
    from kafka_recon.window import Window

    values = [json.dumps({"id": i, "ts": AT}) for i in range(1, 51)]
    topic = f"digest-{uuid.uuid4().hex[:8]}"
    _fill(kafka.bootstrap, topic, values)
    config = tmp_path / "flows.yaml"
    config.write_text(FLOW.format(bootstrap=kafka.bootstrap, topic=topic))
    flow = load_flow(config, "t")
    window = Window(START, END, flow.grace)

    out, first = P.replay_topic(spark, flow, flow.topic_tier, window,
                                RunFolder(tmp_path / "same"), keep_records=False)
    first.unpersist()
    r1, r2 = out.replays
    assert r2.same_records is True and r2.group != r1.group
    same = {"read", "count", "distinct", "fingerprint", "digest"}
    assert r2.model_dump(include=same) == r1.model_dump(include=same)

    # a single replay has nothing to compare with: no digest is computed
    out, first = P.replay_topic(spark, flow, flow.topic_tier, window,
                                RunFolder(tmp_path / "one"), replays_wanted=1,
                                keep_records=False)
    first.unpersist()
    [only] = out.replays
    assert only.digest is None and (only.count, only.distinct) == (50, 50)

    real = P.digests

    def replaced_between_reads(raw: Any, record: Any) -> Any:
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        for fut in admin.delete_topics([topic]).values():
            fut.result(30)
        for _ in range(60):  # a deleted topic's name is free again a moment later
            try:
                _fill(kafka.bootstrap, topic, [*values[:-1], json.dumps(
                    {"id": 999, "ts": AT})])
                break
            except Exception:  # noqa: BLE001 - TOPIC_ALREADY_EXISTS while it is deleted
                time.sleep(1)
        return real(raw, record)

    monkeypatch.setattr(P, "digests", replaced_between_reads)
    out, first = P.replay_topic(spark, flow, flow.topic_tier, window,
                                RunFolder(tmp_path / "changed"), keep_records=False)
    first.unpersist()
    r1, r2 = out.replays
    assert r2.same_records is False and r2.first_read is not None
    assert r2.first_read.digest != r1.digest and r2.group.endswith("-r2b")
    assert (r2.count, r2.distinct) == (r1.count, r1.distinct) == (50, 50)
    assert r2.fingerprint != r1.fingerprint  # id 50 became id 999
