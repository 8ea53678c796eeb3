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
    scn.produce([(i, t) for i, t in rows.items() if i not in NEVER_PUBLISHED],
                headers={i: [("trace", f"t-{i}".encode())] for i in NEVER_LOADED})
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

    # the consume side's records as the topic holds them: key, value, headers, partition and
    # offset
    assert consume.records_dir
    topic = pq.read_table(scn.out / consume.records_dir).to_pylist()
    assert sorted(int(r["id"]) for r in topic) == sorted(NEVER_LOADED)
    for r in topic:
        assert json.loads(r["value"])["id"] == int(r["id"]) and r["key"] == r["id"].encode()
        assert r["offset"] >= 0 and r["partition"] in (0, 1, 2)
        assert r["headers"] == [{"key": "trace", "value": f"t-{r['id']}".encode()}]
    # the write side's upstream rows, every column of the id query
    assert write.records_dir
    upstream = pq.read_table(scn.out / write.records_dir).to_pylist()
    assert sorted(int(r["kafka_recon_id"]) for r in upstream) == sorted(NEVER_PUBLISHED)
    assert {"id", "event_time"} <= set(upstream[0])
    assert (scn.out / "repair" / "plan.json").exists()

    # the report shows the plan's summary
    text = (scn.out / "report.txt").read_text()
    assert f"repair plan {plan.digest[:12]}" in text
    assert ("- topic->sink (consume side): 3 of 3 lost record(s) from the topic 'topic' to "
            f"'{scn.topic}.kafka-recon-repair'") in text
    assert "from the upstream 'db' for the owners (not published)" in text
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


def _repair_topic_records(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    """Every committed record of a repair topic, with its headers, as its consumer reads it."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{topic}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    out: list[dict[str, Any]] = []
    idle = 0
    try:
        while idle < 10:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                idle += 1
                continue
            idle = 0
            out.append({"key": msg.key(), "value": msg.value(),
                        "headers": {k: v.decode() for k, v in msg.headers() or []}})
    finally:
        consumer.close()
    return out


def _planned(kafka: KafkaCluster, tmp_path: Path, spark: Any, sink_lacks: set[int]
             ) -> tuple[Scenario, Any, Any, dict[int, dict[str, Any]]]:
    """A window of 12 records whose sink lacks `sink_lacks`, run and planned: the scenario,
    the run, the plan and its one hop's records by id."""
    scn = Scenario(tmp_path, kafka.bootstrap)
    scn.flow_through(12, sink_lacks=sink_lacks)
    scn.reconcile(spark)
    run = orchestrate.load("f", START.isoformat(), END.isoformat(), scn.config, scn.out)
    plan = orchestrate.plan_repair(run, spark)
    [hop] = plan.hops
    assert hop.records_dir
    rows = pq.read_table(scn.out / hop.records_dir).to_pylist()
    return scn, run, plan, {int(r["id"]): r for r in rows}


def test_a_delivery_publishes_each_planned_record_once_ever(
        kafka: KafkaCluster, tmp_path: Path, spark: Any) -> None:
    from confluent_kafka import Producer

    scn, run, plan, planned = _planned(kafka, tmp_path, spark, {3, 8})
    window = f"{START:%Y-%m-%dT%H:%M:%SZ}/{END:%Y-%m-%dT%H:%M:%SZ}"
    target = f"{scn.topic}.kafka-recon-repair"

    with pytest.raises(UsageError, match="is not the window's plan"):
        orchestrate.deliver_repair(run, spark, "0" * 12)

    # a delivery that never committed (its transaction aborted) delivered nothing
    three = planned[3]
    orchestrate_headers = [("kafka-recon-flow", b"f"), ("kafka-recon-window", window.encode()),
                           ("kafka-recon-partition", str(three["partition"]).encode()),
                           ("kafka-recon-offset", str(three["offset"]).encode())]
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(target, 3, 1)])[target].result(30)
    aborted = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": "t-aborted"})
    aborted.init_transactions(30)
    aborted.begin_transaction()
    aborted.produce(target, key=three["key"], value=three["value"],
                    headers=orchestrate_headers)
    aborted.flush(30)
    aborted.abort_transaction(30)

    first = orchestrate.deliver_repair(run, spark, plan.digest[:12])
    [d] = first.hops
    assert (d.target, d.sent, d.already) == (target, 2, 0)
    got = _repair_topic_records(kafka.bootstrap, target)
    assert sorted(json.loads(r["value"])["id"] for r in got) == [3, 8]
    for r in got:
        i = json.loads(r["value"])["id"]
        assert r["headers"]["kafka-recon-flow"] == "f"
        assert r["headers"]["kafka-recon-window"] == window
        assert r["headers"]["kafka-recon-plan"] == plan.digest
        assert (int(r["headers"]["kafka-recon-partition"]),
                int(r["headers"]["kafka-recon-offset"])) == (planned[i]["partition"],
                                                            planned[i]["offset"])

    # the ids sent, in the run folder and, with the plan's digest, in the store
    assert scn.ids(d.ids_file) == {3, 8}
    from kafka_recon.stores import repairs
    kept = [r for r in repairs.deliveries("f") if r["plan_digest"] == plan.digest]
    assert [(r["hop"], r["target"], r["sent"], r["already"], r["ids_file"]) for r in kept] == [
        ("topic->sink", target, 2, 0, d.ids_file)]

    # approved again, or planned again over the same loss: nothing is sent twice
    again = orchestrate.deliver_repair(run, spark, plan.digest)
    assert (again.hops[0].sent, again.hops[0].already) == (0, 2)
    assert scn.ids(again.hops[0].ids_file) == set()
    assert [r["sent"] for r in repairs.deliveries("f")
            if r["plan_digest"] == plan.digest] == [2, 0]
    replanned = orchestrate.plan_repair(run, spark)
    assert orchestrate.deliver_repair(run, spark, replanned.digest).hops[0].sent == 0
    assert len(_repair_topic_records(kafka.bootstrap, target)) == 2


def _lost_on_both_sides(scn: Scenario, spark: Any, repair: str
                        ) -> tuple[dict[int, Any], Any, Any]:
    """N rows with write_side publish and `repair` settings, NEVER_PUBLISHED lost on the write
    side and NEVER_LOADED (with a header of their own) on the consume side, run and planned:
    the rows, the run and the plan."""
    scn.config.write_text(scn.config.read_text().replace(
        "    replays: 2\n", "    replays: 2\n    repair:\n      write_side: publish\n" + repair))
    rows = {i: at(i * 10) for i in range(1, N + 1)}
    scn.upstream(rows)
    scn.produce([(i, t) for i, t in rows.items() if i not in NEVER_PUBLISHED],
                headers={i: [("trace", f"t-{i}".encode())] for i in NEVER_LOADED})
    scn.sink([(i, t) for i, t in rows.items() if i not in NEVER_PUBLISHED | NEVER_LOADED])
    scn.reconcile(spark)
    run = orchestrate.load("f", START.isoformat(), END.isoformat(), scn.config, scn.out)
    return rows, run, orchestrate.plan_repair(run, spark)


def test_a_repaired_window_reruns_ok_once_the_sink_has_loaded_the_repair_topic(
        kafka: KafkaCluster, tmp_path: Path, spark: Any) -> None:
    """Both sides at once, with the flow's own repair topic and write-side rows published as
    JSON: the re-run counts the published rows as the topic's own, and the sink team's
    consumer (here: this test) loads the repair topic as documented; the window is then ok,
    and a second delivery sends nothing."""
    scn = Scenario(tmp_path, kafka.bootstrap)
    target = f"{scn.topic}.fixes"
    rows, run, plan = _lost_on_both_sides(scn, spark, f"      topics: {{topic: \"{target}\"}}\n")

    delivery = orchestrate.deliver_repair(run, spark, plan.digest)
    sent = {d.hop: (d.target, d.sent, d.already) for d in delivery.hops}
    assert sent == {"db->topic": (target, 2, 0), "topic->sink": (target, 3, 0)}
    got = _repair_topic_records(kafka.bootstrap, target)
    upstream = [r for r in got if "kafka-recon-id" in r["headers"]]
    assert sorted(int(r["headers"]["kafka-recon-id"]) for r in upstream) == \
        sorted(NEVER_PUBLISHED)
    for r in upstream:  # the flow's record spec reads the row's id and time from the value
        value = json.loads(r["value"])
        i = int(value["id"])
        assert r["key"] == str(i).encode()
        assert value["ts"] == rows[i].strftime("%Y-%m-%d %H:%M:%S"), "as the upstream has it"
    for r in got:  # a topic's copy carries the original's own headers beside kafka-recon's
        if "kafka-recon-id" not in r["headers"]:
            assert r["headers"]["trace"] == f"t-{json.loads(r['value'])['id']}"
    assert orchestrate.deliver_repair(run, spark, plan.digest).hops[0].sent == 0

    # the re-run before the sink loaded anything: the topic is whole again, the sink is not
    result = scn.reconcile(spark)
    assert findings(result) == [("loss", "consume", "topic->sink",
                                 len(NEVER_LOADED | NEVER_PUBLISHED))]
    replays = json.loads((scn.out / "replays.json").read_text())["topics"][0]
    assert (replays["repair_topic"], replays["repaired"]) == (target, 2)
    # the plan was made of another result: it is refused now
    with pytest.raises(UsageError, match="no longer matches the run folder"):
        orchestrate.deliver_repair(run, spark, plan.digest)

    # the sink team's consumer loads the repair topic into the sink: the window is whole
    scn.sink([(int(json.loads(r["value"])["id"]), rows[int(json.loads(r["value"])["id"])])
              for r in got])
    result = scn.reconcile(spark)
    assert result["status"] == "ok", findings(result)
    assert findings(result) == []
    # the report shows the window before (the plan) and after its repair
    orchestrate.report(run)
    text = (scn.out / "report.txt").read_text()
    assert "of an earlier result of this window" in text, text
    assert f"0 sent to {target}, 3 there before; missing now: 0 (was 3)" in text, text
    assert f"0 sent to {target}, 2 there before; missing now: 0 (was 2)" in text, text


def test_records_put_back_onto_the_flows_own_topic_are_counted_and_loaded_by_the_sinks_consumer(
        kafka: KafkaCluster, tmp_path: Path, spark: Any) -> None:
    """`repair.to: topic`: both sides' records go back onto the topic the sink already reads.
    They land after the window's offsets, stamped when re-delivered; the re-run counts the
    write-side rows as the topic's own from its run folder's delivery, the sink's consumer
    loads the copies with no change, and nothing is sent twice."""
    scn = Scenario(tmp_path, kafka.bootstrap)
    rows, run, plan = _lost_on_both_sides(scn, spark, "      to: topic\n")

    delivery = orchestrate.deliver_repair(run, spark, plan.digest)
    assert {d.hop: (d.target, d.sent, d.already) for d in delivery.hops} == {
        "db->topic": (scn.topic, 2, 0), "topic->sink": (scn.topic, 3, 0)}
    everything = _repair_topic_records(kafka.bootstrap, scn.topic)
    copies = [r for r in everything if "kafka-recon-flow" in r["headers"]]
    assert len(everything) == N - len(NEVER_PUBLISHED) + 5 and len(copies) == 5
    # (a write-side row's id is the upstream's exact text)
    assert sorted(int(json.loads(r["value"])["id"]) for r in copies) == sorted(
        NEVER_PUBLISHED | NEVER_LOADED)
    for r in copies:
        if "kafka-recon-id" not in r["headers"]:
            assert r["headers"]["trace"] == f"t-{json.loads(r['value'])['id']}"
    assert sum(d.sent for d in orchestrate.deliver_repair(run, spark, plan.digest).hops) == 0

    # the re-run: the write side's rows count as the topic's own; the sink has not loaded yet
    result = scn.reconcile(spark)
    assert findings(result) == [("loss", "consume", "topic->sink",
                                 len(NEVER_LOADED | NEVER_PUBLISHED))]
    replays = json.loads((scn.out / "replays.json").read_text())["topics"][0]
    assert (replays["repair_topic"], replays["repaired"]) == (scn.topic, 2)
    # the sink's own consumer reads on past the window and loads the copies
    scn.sink([(int(json.loads(r["value"])["id"]), rows[int(json.loads(r["value"])["id"])])
              for r in copies])
    result = scn.reconcile(spark)
    assert result["status"] == "ok", findings(result)
    replanned = orchestrate.load("f", START.isoformat(), END.isoformat(), scn.config, scn.out)
    with pytest.raises(UsageError, match="nothing to repair"):
        orchestrate.plan_repair(replanned, spark)


ORDER = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}


def test_write_side_rows_of_an_avro_topic_are_published_with_its_latest_registry_schema(
        kafka: KafkaCluster, tmp_path: Path, spark: Any) -> None:
    """`repair.write_side: publish` on a registry Avro topic: the rows are written with the
    latest schema of `<topic>-value` (a field it requires and nothing fills refuses the
    delivery before any write), a sink's own Avro deserializer reads them, and the re-run
    counts them as the topic's own."""

    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from kafka_recon.errors import ConfigError

    scn = Scenario(tmp_path, kafka.bootstrap, partitions=1)
    client = scn.avro_through_registry("repair")
    scn.config.write_text(scn.config.read_text().replace(
        "    replays: 2\n", "    replays: 2\n    repair: {write_side: publish}\n"))
    rows = {i: at(i * 10) for i in range(1, N + 1)}
    scn.upstream(rows)
    scn.sink([(i, t) for i, t in rows.items() if i not in NEVER_PUBLISHED])
    ctx = SerializationContext(scn.topic, MessageField.VALUE)
    v1 = AvroSerializer(client, json.dumps(ORDER), conf={"auto.register.schemas": True})
    scn.produce_raw([(str(i).encode(), v1({"id": i, "ts": t}, ctx), t)
                     for i, t in rows.items() if i not in NEVER_PUBLISHED])
    assert findings(scn.reconcile(spark)) == [("loss", "write", "db->topic", 2)]
    run = orchestrate.load("f", START.isoformat(), END.isoformat(), scn.config, scn.out)
    plan = orchestrate.plan_repair(run, spark)
    target = f"{scn.topic}.kafka-recon-repair"
    subject = f"{scn.topic}-value"

    # the latest schema requires a field the rows do not fill: refused, nothing written
    strict = {**ORDER, "fields": [*ORDER["fields"], {"name": "channel", "type": "string"}]}
    client.register_schema(subject, Schema(json.dumps(strict), "AVRO"))
    with pytest.raises(ConfigError, match=r"cannot write schema id \d+ \(subject "
                                          rf"{subject}\): \$\.channel \(required\)"):
        orchestrate.deliver_repair(run, spark, plan.digest)
    assert not _repair_topic_records(kafka.bootstrap, target)

    # a later version with a default: the rows are written with it
    latest = {**ORDER, "fields": [*ORDER["fields"],
                                  {"name": "channel", "type": "string", "default": "repair"}]}
    latest_id = client.register_schema(subject, Schema(json.dumps(latest), "AVRO"))
    [hop] = orchestrate.deliver_repair(run, spark, plan.digest).hops
    assert (hop.target, hop.sent) == (target, 2)
    read = AvroDeserializer(client)
    got = _repair_topic_records(kafka.bootstrap, target)
    assert {int.from_bytes(r["value"][1:5], "big") for r in got} == {latest_id}
    docs = sorted((read(r["value"], ctx) for r in got), key=lambda d: d["id"])
    assert [(d["id"], d["ts"], d["channel"]) for d in docs] == [
        (i, rows[i], "repair") for i in sorted(NEVER_PUBLISHED)]

    # the re-run decodes them with the flow's own reader and counts them as the topic's:
    # the topic is whole, and the loss is now the sink's, until it loads them
    assert findings(scn.reconcile(spark)) == [("loss", "consume", "topic->sink", 2)]
    replays = json.loads((scn.out / "replays.json").read_text())["topics"][0]
    assert (replays["repair_topic"], replays["repaired"]) == (target, 2)


ZOMBIE = """
import sys
from confluent_kafka import Producer
bootstrap, topic, txid, key, value, headers = sys.argv[1:7]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txid})
p.init_transactions(30)
p.begin_transaction()
p.produce(topic, key=key.encode(), value=value.encode(),
          headers=[tuple(h.split("=", 1)) for h in headers.split(";")])
p.flush(30)
print("open", flush=True)
sys.stdin.read()  # killed here, its transaction open
"""


def test_a_delivery_killed_mid_way_resumes_without_a_duplicate(
        kafka: KafkaCluster, tmp_path: Path, spark: Any) -> None:
    """What a delivery killed mid-way leaves: one task's transaction committed, another's
    open when its process died. The resumed delivery sends only what is missing; the open
    transaction never commits (the resumed task's transactional id fences it), so the repair
    topic's reader sees each planned record exactly once."""
    import signal

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    scn, run, plan, planned = _planned(kafka, tmp_path, spark, {2, 5, 7})
    window = f"{START:%Y-%m-%dT%H:%M:%SZ}/{END:%Y-%m-%dT%H:%M:%SZ}"
    target = f"{scn.topic}.kafka-recon-repair"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(target, 3, 1)])[target].result(30)

    def headers(r: dict[str, Any]) -> list[tuple[str, bytes]]:
        return [("kafka-recon-flow", b"f"), ("kafka-recon-window", window.encode()),
                ("kafka-recon-plan", plan.digest.encode()),
                ("kafka-recon-partition", str(r["partition"]).encode()),
                ("kafka-recon-offset", str(r["offset"]).encode())]

    txids = f"kafka-recon-repair-f-{plan.digest[:16]}-topic__sink"
    # the task that committed before the kill: id 2
    done = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": f"{txids}-1"})
    done.init_transactions(30)
    done.begin_transaction()
    done.produce(target, key=planned[2]["key"], value=planned[2]["value"],
                 headers=headers(planned[2]))
    done.commit_transaction(30)
    # the task killed with its transaction open: id 5, under the id its retry takes
    five = planned[5]
    zombie = subprocess.Popen(
        [sys.executable, "-c", ZOMBIE, kafka.bootstrap, target, f"{txids}-0",
         five["key"].decode(), five["value"].decode(),
         ";".join(f"{k}={v.decode()}" for k, v in headers(five))],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert zombie.stdout is not None and zombie.stdout.readline().strip() == "open"
    zombie.send_signal(signal.SIGKILL)
    zombie.wait(30)

    resumed = orchestrate.deliver_repair(run, spark, plan.digest)
    assert (resumed.hops[0].sent, resumed.hops[0].already) == (2, 1)
    got = _repair_topic_records(kafka.bootstrap, target)
    assert sorted(json.loads(r["value"])["id"] for r in got) == [2, 5, 7], \
        "each planned record once: the killed task's open transaction never counts"
