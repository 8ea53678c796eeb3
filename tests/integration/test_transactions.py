"""Exactly-once producers on a real broker: a transaction left open across a window is named,
never counted as loss.

A transactional producer writes records of the window and dies without committing or aborting
(its `transaction.timeout.ms` not yet passed), between two transactions another producer
commits. A read_committed reader (the replay, every sink) cannot read past the partition's
last stable offset until the broker aborts it. While it is open the run is `inconclusive`,
naming the partition, the last stable offset and the transactional id holding it, and `check`
says the same; once the broker has aborted it, the same window reads exactly: the open
transaction's records lost on the write side (they were rolled back), every committed one
counted.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from harness.services.kafka import KafkaCluster
from kafka_recon.errors import TopicError
from tests.integration.engine_harness import END, START, Scenario, findings

pytestmark = pytest.mark.integration

KAFKA_RECON = Path(sys.executable).parent / "kafka-recon"
# the open transaction's timeout: long enough for the runs made while it is open, short enough
# for the broker to abort it within the test
TIMEOUT_MS = 45_000


def _transactional(bootstrap: str, tid: str, timeout_ms: int = 60_000) -> Any:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                  "transaction.timeout.ms": timeout_ms, "linger.ms": 5})
    p.init_transactions(30)
    return p


def _stable(bootstrap: str, topic: str) -> bool:
    """Every partition's last stable offset at its high watermark: no transaction open."""
    from kafka_recon.cluster.transactions import stable_offsets
    from kafka_recon.sources.kafka_client import KafkaEndpoint

    return all(lso == hw for lso, hw in stable_offsets(KafkaEndpoint(bootstrap), topic,
                                                       [0, 1, 2]).values())


def test_an_open_transaction_is_named_while_open_and_its_records_lost_once_aborted(
        tmp_path: Path, kafka: KafkaCluster, spark: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    scn = Scenario(tmp_path, kafka.bootstrap)
    at = {i: START + timedelta(minutes=10 * i) for i in range(1, 24)}
    scn.upstream({i: at[i] for i in at})
    scn.sink([(i, at[i]) for i in at if i not in (11, 12, 13)])
    committer = _transactional(kafka.bootstrap, f"orders-app-{uuid.uuid4().hex[:6]}")
    hanging_id = f"dying-app-{uuid.uuid4().hex[:6]}"
    hanging = _transactional(kafka.bootstrap, hanging_id, TIMEOUT_MS)
    # committed, then the dying producer's transaction (never ended), then committed again,
    # all into partition 0: the second batch lies past the last stable offset
    committer.begin_transaction()
    scn.produce([(i, at[i]) for i in range(1, 11)], partition=0, producer=committer)
    committer.commit_transaction(30)
    hanging.begin_transaction()
    scn.produce([(i, at[i]) for i in (11, 12, 13)], partition=0, producer=hanging)
    hanging.flush(30)
    opened = time.monotonic()
    committer.begin_transaction()
    scn.produce([(i, at[i]) for i in range(14, 24)], partition=0, producer=committer)
    committer.commit_transaction(30)
    assert not _stable(kafka.bootstrap, scn.topic)

    monkeypatch.setenv("KAFKA_RECON_TRANSACTION_WAIT_SECONDS", "3")
    env = os.environ.copy()
    window = ["--start", START.isoformat(), "--end", END.isoformat()]
    checked = subprocess.run([str(KAFKA_RECON), "check", "--config", str(scn.config),
                              *window], capture_output=True, text=True, timeout=300,
                             check=False, env=env)
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert "open_transaction" in checked.stdout and hanging_id in checked.stdout

    # while it is open: inconclusive, naming it (never the committed records as lost)
    with pytest.raises(TopicError, match="open_transaction"):
        scn.reconcile(spark)
    held = json.loads((scn.out / "result.json").read_text())
    assert held["status"] == "inconclusive" and not held["findings"], held
    [reason] = held["reasons"]
    for said in ("open_transaction", f"partition 0 of '{scn.topic}'",
                 f"transactional id '{hanging_id}'", f"transaction.timeout.ms {TIMEOUT_MS}",
                 "kafka-transactions.sh"):
        assert said in reason, (said, reason)
    # the last stable offset is the open transaction's first: 10 records and, as the
    # coordinator writes it, the first commit's marker before it or not
    stable = re.search(r"last stable offset (\d+), high watermark (\d+)", reason)
    assert stable and stable.group(1) in ("10", "11") and int(stable.group(2)) > 23, reason
    assert f"from offset {stable.group(1)}" in reason
    assert time.monotonic() - opened < TIMEOUT_MS / 1000, "the transaction timed out first"

    # the broker aborts it after its timeout: the same window, exact
    deadline = time.monotonic() + TIMEOUT_MS / 1000 + 90
    while not _stable(kafka.bootstrap, scn.topic):
        assert time.monotonic() < deadline, "the broker never aborted the transaction"
        time.sleep(2)
    exact = scn.reconcile(spark)
    assert exact["status"] == "findings", exact
    assert findings(exact) == [("loss", "write", "db->topic", 3)], exact["findings"]
    [loss] = [f for f in exact["findings"] if f["kind"] == "loss"]
    assert scn.ids(loss["ids"]) == {11, 12, 13}
    assert {t["name"]: t["count"] for t in exact["tiers"]} == {"db": 23, "topic": 20,
                                                               "sink": 20}
    committer.flush(10)
    del hanging


def test_a_backfill_committed_in_transactions_now_is_read_whole_past_its_markers(
        tmp_path: Path, kafka: KafkaCluster, spark: Any) -> None:
    """A past day's records published again with exactly-once semantics, each stamped with
    its event time, committed now in batches, zstd-compressed: each commit marker is stamped
    with the broker's clock (now), so the first offset stamped after the window is the first
    marker. Every committed record of the window counts, none is lost."""
    scn = Scenario(tmp_path, kafka.bootstrap)
    at = {i: START + timedelta(minutes=12 * i) for i in range(1, 101)}
    scn.upstream(at)
    scn.sink(list(at.items()))
    from confluent_kafka import Producer

    backfill = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 5,
                         "compression.type": "zstd",
                         "transactional.id": f"backfill-{uuid.uuid4().hex[:6]}"})
    backfill.init_transactions(30)
    ids = sorted(at)
    for batch in range(5):
        backfill.begin_transaction()
        scn.produce([(i, at[i]) for i in ids[batch * 20:(batch + 1) * 20]], partition=0,
                    producer=backfill)
        backfill.commit_transaction(30)
    result = scn.reconcile(spark)
    assert result["status"] == "ok", (result["reasons"], result["findings"])
    assert {t["name"]: t["count"] for t in result["tiers"]} == {"db": 100, "topic": 100,
                                                                "sink": 100}
    # partition 0's read was carried past the first marker to the last stable offset, and
    # the replays say why
    replays = json.loads((scn.out / "replays.json").read_text())
    [read] = [r for r in replays["topics"][0]["read_offsets"] if r["partition"] == 0]
    assert read["end"] == read["high_watermark"] == 105, read  # 100 records, 5 markers
    assert "stamped before it" in read["why"] and "transaction markers" in read["why"], read


def test_a_log_append_time_topic_with_transactions_reads_its_live_window_exactly(
        tmp_path: Path, kafka: KafkaCluster, spark: Any) -> None:
    """A topic whose timestamps are the broker's (`message.timestamp.type=LogAppendTime`): the
    records, their markers and the records after the window are all stamped by one clock as
    they arrive. A window open while they are written, one transaction aborted in it, reads
    exactly: the aborted records lost on the write side, nothing else."""
    from datetime import UTC, datetime

    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    from kafka_recon import orchestrate

    scn = Scenario(tmp_path, kafka.bootstrap)
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    res = ConfigResource(ResourceType.TOPIC, scn.topic,
                         set_config={"message.timestamp.type": "LogAppendTime"})
    admin.alter_configs([res])[res].result(30)
    # a window that is open now: grace and disorder of seconds, so that it closes soon
    scn.config.write_text(scn.config.read_text().replace("grace: 10m",
                                                         "grace: 5s\n    disorder: 5s"))
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=30)
    end = start + timedelta(seconds=60)
    at = {i: start + timedelta(seconds=i) for i in range(1, 31)}
    scn.upstream(at)
    scn.sink([(i, t) for i, t in at.items() if i not in (11, 12, 13)])
    producer = _transactional(kafka.bootstrap, f"lat-{uuid.uuid4().hex[:6]}")
    for batch, abort in (((1, 11), False), ((11, 14), True), ((14, 31), False)):
        producer.begin_transaction()
        scn.produce([(i, at[i]) for i in range(*batch)], producer=producer)
        (producer.abort_transaction if abort else producer.commit_transaction)(30)
    time.sleep(max((end + timedelta(seconds=12) - datetime.now(UTC)).total_seconds(), 0))
    # records after the window, stamped by the broker after its close
    producer.begin_transaction()
    scn.produce([(i, start + timedelta(seconds=70)) for i in range(100, 105)],
                producer=producer)
    producer.commit_transaction(30)
    scn.out = tmp_path / "run"
    run = orchestrate.load("f", start.isoformat(), end.isoformat(), scn.config, scn.out)
    result = orchestrate.execute(run, spark, with_report=False).as_json()
    assert findings(result) == [("loss", "write", "db->topic", 3)], (result["reasons"],
                                                                    result["findings"])
    [loss] = [f for f in result["findings"] if f["kind"] == "loss"]
    assert scn.ids(loss["ids"]) == {11, 12, 13}
    assert {t["name"]: t["count"] for t in result["tiers"]} == {"db": 30, "topic": 27,
                                                               "sink": 27}


def test_a_transaction_committed_after_the_close_is_counted_or_arrived_after_grace(
        tmp_path: Path, kafka: KafkaCluster, spark: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An exactly-once stream processor stamps each record with its event time and commits
    when it checkpoints, here long after the window's grace and disorder margin. While its
    transaction is open, the window is `inconclusive`, naming it. Once committed: its records
    written before the next window's records count; those it wrote after records stamped past
    the close plus the margin (processing lag) lie past the offsets replayed. They are found
    there by the loss search and reported lost with `arrived_after_grace`, never with an
    unknown cause."""
    scn = Scenario(tmp_path, kafka.bootstrap)
    on_time = {i: START + timedelta(hours=1, minutes=i) for i in range(1, 21)}
    prompt = {i: END - timedelta(minutes=2) for i in (21, 22, 23)}
    lagging = {i: END - timedelta(minutes=1) for i in (24, 25, 26)}
    scn.upstream({**on_time, **prompt, **lagging})
    scn.sink(list({**on_time, **prompt, **lagging}.items()))
    scn.produce(list(on_time.items()), partition=0)
    proc_id = f"stream-proc-{uuid.uuid4().hex[:6]}"
    proc = _transactional(kafka.bootstrap, proc_id, 120_000)
    proc.begin_transaction()
    scn.produce(list(prompt.items()), partition=0, producer=proc)
    proc.flush(30)
    # the next window's records, past the close (end + 10m grace) plus the 5m margin
    scn.produce([(100 + i, END + timedelta(minutes=20 + i)) for i in range(5)], partition=0)
    scn.produce(list(lagging.items()), partition=0, producer=proc)
    proc.flush(30)

    monkeypatch.setenv("KAFKA_RECON_TRANSACTION_WAIT_SECONDS", "2")
    with pytest.raises(TopicError, match="open_transaction"):
        scn.reconcile(spark)
    held = json.loads((scn.out / "result.json").read_text())
    assert held["status"] == "inconclusive" and proc_id in held["reasons"][0], held

    proc.commit_transaction(30)
    result = scn.reconcile(spark)
    assert findings(result) == [("loss", "write", "db->topic", 3)], (result["reasons"],
                                                                    result["findings"])
    [loss] = [f for f in result["findings"] if f["kind"] == "loss"]
    assert scn.ids(loss["ids"]) == set(lagging)
    why = loss["cause"]
    assert why["code"] == "arrived_after_grace", why
    assert any("past the offsets replayed" in e for e in why["evidence"]), why
    assert {t["name"]: t["count"] for t in result["tiers"]} == {"db": 26, "topic": 23,
                                                               "sink": 26}
    replays = json.loads((scn.out / "replays.json").read_text())
    [read] = [r for r in replays["topics"][0]["read_offsets"] if r["partition"] == 0]
    # 20 + 3 records, the first of the next window's: the end found by timestamp stands
    assert read["end"] == 23 and read["why"] is None, read
