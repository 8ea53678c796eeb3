"""`repair plan` on a real topic: a window that lost records on both sides gets a plan holding
exactly the lost records, read back from where they still are (the topic's records at their
offsets for the consume side, the upstream's rows for the write side), and names the id whose
upstream row is gone since, with why. The plan's digest covers the result and its files: the
same state plans to the same digest, a changed one to another."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from harness.services.kafka import KafkaCluster
from kafka_recon import orchestrate
from kafka_recon.errors import UsageError
from tests.integration.engine_harness import END, START, Scenario, at, findings

pytestmark = pytest.mark.integration

N = 30
NEVER_PUBLISHED = {4, 17}  # write side: in the upstream, never in the topic
NEVER_LOADED = {9, 21, 28}  # consume side: in the topic, never in the sink


def test_a_plan_holds_exactly_the_lost_records_from_where_each_still_is(
        kafka: KafkaCluster, tmp_path: Path, spark: Any) -> None:
    scn = Scenario(tmp_path, kafka.bootstrap)
    rows = {i: at(i * 10) for i in range(1, N + 1)}
    scn.upstream(rows)
    scn.produce([(i, t) for i, t in rows.items() if i not in NEVER_PUBLISHED])
    scn.sink([(i, t) for i, t in rows.items() if i not in NEVER_PUBLISHED | NEVER_LOADED])
    result = scn.reconcile(spark)
    assert findings(result) == [("loss", "consume", "topic->sink", len(NEVER_LOADED)),
                                ("loss", "write", "db->topic", len(NEVER_PUBLISHED))]
    run = orchestrate.load("f", START.isoformat(), END.isoformat(), scn.config, scn.out)

    plan = orchestrate.plan_repair(run, spark)
    hops = {h.hop: h for h in plan.hops}
    write, consume = hops["db->topic"], hops["topic->sink"]
    assert (write.side, write.source, write.lost, write.records, write.uncovered) == (
        "write", "upstream", 2, 2, 0)
    assert (consume.side, consume.source, consume.lost, consume.records, consume.uncovered) \
        == ("consume", "topic", 3, 3, 0)
    assert consume.sample_ids == sorted(str(i) for i in NEVER_LOADED)

    # the consume side's records as the topic holds them: key, value, partition and offset
    assert consume.records_dir
    topic = pq.read_table(scn.out / consume.records_dir).to_pylist()
    assert sorted(int(r["id"]) for r in topic) == sorted(NEVER_LOADED)
    for r in topic:
        assert json.loads(r["value"])["id"] == int(r["id"]) and r["key"] == r["id"].encode()
        assert r["offset"] >= 0 and r["partition"] in (0, 1, 2)
    # the write side's upstream rows, every column of the id query
    assert write.records_dir
    upstream = pq.read_table(scn.out / write.records_dir).to_pylist()
    assert sorted(int(r["kafka_recon_id"]) for r in upstream) == sorted(NEVER_PUBLISHED)
    assert {"id", "event_time"} <= set(upstream[0])
    assert (scn.out / "repair" / "plan.json").exists()

    # the report shows the plan's summary
    text = (scn.out / "report.txt").read_text()
    assert f"repair plan {plan.digest[:12]}" in text
    assert "- topic->sink (consume side): 3 of 3 lost record(s) from the topic 'topic'" in text
    assert 'id="repair-hops"' in (scn.out / "report.html").read_text()

    same = orchestrate.plan_repair(run, spark)
    assert same.digest == plan.digest, "the same result and records: the same plan"

    # an upstream row deleted since the run: that id cannot be re-delivered, and says why
    with sqlite3.connect(scn.up) as db:
        db.execute("DELETE FROM src WHERE id = 17")
    changed = orchestrate.plan_repair(run, spark)
    write = {h.hop: h for h in changed.hops}["db->topic"]
    assert (write.records, write.uncovered) == (1, 1)
    assert write.uncovered_file
    assert scn.texts(write.uncovered_file) == ["17"]
    assert scn.texts(write.uncovered_file, "reason") == [
        "tier 'db' has no row with this id in the window now"]
    assert changed.digest != plan.digest

    # as a user runs it
    done = subprocess.run(
        [str(Path(sys.executable).parent / "kafka-recon"), "repair", "plan", "--config",
         str(scn.config), "--flow", "f", "--start", START.isoformat(), "--end", END.isoformat(),
         "--out", str(scn.out), "--master", "local[1]"],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    assert done.returncode == 0, done.stdout + done.stderr
    print(done.stdout)
    assert "db->topic (write side): 2 lost; 1 record(s) from the upstream 'db'" in done.stdout
    assert "topic->sink (consume side): 3 lost; 3 record(s) from the topic 'topic'" \
        in done.stdout
    assert f"plan {changed.digest}: " in done.stdout


def test_a_window_without_a_result_or_without_a_loss_has_nothing_to_plan(
        kafka: KafkaCluster, tmp_path: Path, spark: Any) -> None:
    scn = Scenario(tmp_path, kafka.bootstrap)
    scn.out = tmp_path / "run"
    run = orchestrate.load("f", START.isoformat(), END.isoformat(), scn.config, scn.out)
    with pytest.raises(UsageError, match="no result.json: run the window first"):
        orchestrate.plan_repair(run, spark)
    scn.flow_through(5)
    assert scn.reconcile(spark)["status"] == "ok"
    with pytest.raises(UsageError, match="holds no loss with its ids: nothing to repair"):
        orchestrate.plan_repair(run, spark)
    assert not (scn.out / "repair").exists()
