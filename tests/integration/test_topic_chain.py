"""A flow through three topics on a real broker: a database, the topic it is written to, a
mirrored copy of that topic, a processor's output topic whose values have another shape, and
a sink. Each hop's loss and duplicates are found with exact ids and the right side.

The mirror and the processor here are plain consume-produce loops written by the test (they
copy each record with its partition and timestamp, as MirrorMaker 2 does, and drop or repeat
chosen ones); the real MirrorMaker 2 belongs to the drill's replication scenarios.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from harness.services.kafka import KafkaCluster, StageProducer
from kafka_recon import orchestrate
from tests.integration.engine_harness import END, START, Scenario, at, findings
from tests.report_lines import meaningless

pytestmark = pytest.mark.integration

ROWS = {i: at(i * 5) for i in range(1, 201)}  # 200 records over the first 17 hours

CHAIN = """
  mirrored:
    type: kafka
    via: replication
    bootstrap: "{bootstrap}"
    topic: "{mirrored}"
    grace: 30m
    tolerance: {{duplicate: {dup_tolerance}}}
  enriched:
    type: kafka
    via: process
    bootstrap: "{bootstrap}"
    topic: "{enriched}"
    record: {{id: "$.order.id", event_time: "$.order.at"}}
"""


def _copy(bootstrap: str, source: str, target: str, partitions: int,
          drop: set[int], repeat: set[int], reshape: bool) -> None:
    """Every record of `source` into `target`, same partition and timestamp, but `drop`;
    `repeat` written twice; with `reshape` the value becomes {"order": {"id", "at"}}."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"copy-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    producer = StageProducer(bootstrap, {"linger.ms": 5})
    consumer.subscribe([source])
    seen, empty = 0, 0
    while empty < 10:
        msg = consumer.poll(1.0)
        if msg is None:
            empty += 1 if seen else 0
            continue
        if msg.error():
            raise RuntimeError(msg.error())
        seen += 1
        value = json.loads(msg.value())
        if value["id"] in drop:
            continue
        out = json.dumps({"order": {"id": value["id"], "at": value["ts"]}}) if reshape \
            else msg.value()
        for _ in range(2 if value["id"] in repeat else 1):
            producer.produce(target, key=msg.key(), value=out, partition=msg.partition(),
                             timestamp=msg.timestamp()[1])
    producer.flush()
    consumer.close()


@pytest.fixture
def chain(kafka: KafkaCluster, tmp_path: Path) -> Scenario:
    scn = Scenario(tmp_path, kafka.bootstrap)
    scn.mirrored = f"src.{scn.topic}"  # type: ignore[attr-defined]  # MirrorMaker 2's naming
    scn.enriched = f"{scn.topic}-enriched"  # type: ignore[attr-defined]
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for fut in admin.create_topics([NewTopic(t, scn.partitions, 1) for t in
                                    (scn.mirrored, scn.enriched)]).values():  # type: ignore
        fut.result(30)
    return scn


def _flow(scn: Any, dup_tolerance: int = 0) -> None:
    """The scenario's flow with the mirrored and the processed topics before the sink."""
    text = scn.config.read_text()
    at_sink = text.index("      - name: sink")
    scn.config.write_text(text[:at_sink] + _as_tiers(CHAIN.format(
        bootstrap=scn.bootstrap, mirrored=scn.mirrored, enriched=scn.enriched,
        dup_tolerance=dup_tolerance)) + text[at_sink:])


def _as_tiers(block: str) -> str:
    """The CHAIN block (name: mapping) as entries of the tiers list."""
    out, lines = [], block.strip("\n").splitlines()
    for line in lines:
        if not line.startswith("    "):
            out.append(f"      - name: {line.strip().rstrip(':')}")
        else:
            out.append("        " + line.strip())
    return "\n".join(out) + "\n"


def _reconcile(scn: Any, spark: Any) -> dict[str, Any]:
    scn.out = scn.tmp / "run"
    run = orchestrate.load("f", START.isoformat(), END.isoformat(), scn.config, scn.out)
    return orchestrate.execute(run, spark, with_report=False).as_json()


def test_each_hop_of_a_three_topic_chain_names_its_own_loss_and_copies(
        chain: Any, spark: Any) -> None:
    _flow(chain)
    chain.upstream(ROWS)
    chain.produce(list(ROWS.items()))
    mirror_lost, mirror_copies = set(range(50, 60)), set(range(70, 75))
    process_lost, sink_lacks = {120, 121}, {180}
    _copy(chain.bootstrap, chain.topic, chain.mirrored, chain.partitions,
          drop=mirror_lost, repeat=mirror_copies, reshape=False)
    _copy(chain.bootstrap, chain.mirrored, chain.enriched, chain.partitions,
          drop=process_lost, repeat=set(), reshape=True)
    chain.sink([(i, t) for i, t in ROWS.items()
                if i not in mirror_lost | process_lost | sink_lacks])
    r = _reconcile(chain, spark)

    assert [t["name"] for t in r["tiers"]] == ["db", "topic", "mirrored", "enriched", "sink"]
    assert [(h["from"], h["to"], h["side"]) for h in r["hops"]] == [
        ("db", "topic", "write"), ("topic", "mirrored", "replication"),
        ("mirrored", "enriched", "process"), ("enriched", "sink", "consume")]
    assert findings(r) == [
        ("duplicate", "replication", "topic->mirrored", 5),
        ("loss", "consume", "enriched->sink", 1),
        ("loss", "process", "mirrored->enriched", 2),
        ("loss", "replication", "topic->mirrored", 10)]
    got = {(f["kind"], f["hop"]): f for f in r["findings"]}
    assert chain.ids(got["loss", "topic->mirrored"]["ids"]) == mirror_lost
    assert chain.ids(got["duplicate", "topic->mirrored"]["ids"]) == mirror_copies
    assert chain.ids(got["loss", "mirrored->enriched"]["ids"]) == process_lost
    assert chain.ids(got["loss", "enriched->sink"]["ids"]) == sink_lacks
    # the copies sit in runs of the mirrored topic: a mirror that re-sent after a restart
    assert got["duplicate", "topic->mirrored"]["cause"]["code"] == "resent_after_restart"
    # every topic replayed, each with its own groups and counts
    assert sorted({x["tier"] for x in r["replays"]}) == ["enriched", "mirrored", "topic"]
    by_tier = {x["tier"]: x["count"] for x in r["replays"]}
    assert by_tier == {"topic": 200, "mirrored": 195, "enriched": 193}
    assert r["replays_consistent"] is True and r["status"] == "findings"
    replays = json.loads((chain.out / "replays.json").read_text())
    assert [t["tier"] for t in replays["topics"]] == ["topic", "mirrored", "enriched"]
    assert replays["topics"][1]["grace_seconds"] == 1800
    # its report, validated: every line says something of a flow through three topics
    run = orchestrate.load("f", START.isoformat(), END.isoformat(), chain.config, chain.out)
    orchestrate.validate(run)
    orchestrate.report(run)
    assert meaningless(chain.out) == []
    assert "topic->mirrored: 10 records missing, 0 allowed" in \
        (chain.out / "report.txt").read_text()


def test_a_mirrors_copies_within_the_hops_tolerance_leave_the_chain_ok(
        chain: Any, spark: Any) -> None:
    _flow(chain, dup_tolerance=5)
    chain.upstream(ROWS)
    chain.produce(list(ROWS.items()))
    _copy(chain.bootstrap, chain.topic, chain.mirrored, chain.partitions,
          drop=set(), repeat={10, 11, 12}, reshape=False)
    _copy(chain.bootstrap, chain.mirrored, chain.enriched, chain.partitions,
          drop=set(), repeat=set(), reshape=True)
    chain.sink(list(ROWS.items()))
    r = _reconcile(chain, spark)
    dup = [f for f in r["findings"] if f["kind"] == "duplicate"]
    assert [(f["hop"], f["count"], f["within_tolerance"]) for f in dup] == [
        ("topic->mirrored", 3, True)]
    # the enriched topic holds each record once: the processor's input copies were read
    # by id, and only the hop into the mirror carries them
    assert r["status"] == "ok"


def test_records_a_processor_drops_on_purpose_are_filtered_not_lost(
        chain: Any, spark: Any) -> None:
    _flow(chain)
    # the processor filters out ids 100-109 on purpose (declared over the mirrored topic's
    # records), passes 109 anyway, and loses 120 and 121
    text = chain.config.read_text().replace(
        '        record: {id: "$.order.id", event_time: "$.order.at"}\n',
        '        record: {id: "$.order.id", event_time: "$.order.at"}\n'
        '        drops: {where: "try_cast(oid AS INT) BETWEEN 100 AND 109 AND note IS NULL",'
        ' fields: {oid: "$.id", note: "$.note"}}\n')
    chain.config.write_text(text)
    chain.upstream(ROWS)
    chain.produce(list(ROWS.items()))
    on_purpose, lost = set(range(100, 109)), {120, 121}
    _copy(chain.bootstrap, chain.topic, chain.mirrored, chain.partitions,
          drop=set(), repeat=set(), reshape=False)
    _copy(chain.bootstrap, chain.mirrored, chain.enriched, chain.partitions,
          drop=on_purpose | lost, repeat=set(), reshape=True)
    chain.sink([(i, t) for i, t in ROWS.items() if i not in on_purpose | lost])
    r = _reconcile(chain, spark)

    assert findings(r) == [("loss", "process", "mirrored->enriched", 2)]
    got = {(f["kind"], f["hop"]): f for f in r["findings"]}
    assert chain.ids(got["loss", "mirrored->enriched"]["ids"]) == lost
    hop = {h["from"]: h for h in r["hops"]}["mirrored"]
    # 109 was a declared drop that got through: observed, never filtered nor missing
    assert hop["filtered"] == 9 and chain.ids(hop["filtered_ids"]) == on_purpose
    assert (hop["expected"], hop["observed"], hop["missing"]) == (191, 189, 2)
    # what was filtered is not expected further on either
    assert {h["from"]: h["missing"] for h in r["hops"]}["enriched"] == 0
    assert "filtered" not in {h["from"]: h for h in r["hops"]}["topic"]
