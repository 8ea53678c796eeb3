"""The engine on a real broker: each scenario's findings and exact id sets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from harness.services.kafka import KafkaCluster
from tests.integration.engine_harness import END, Scenario, at, commit_offset, findings

pytestmark = pytest.mark.integration

ROWS = {i: at(i * 7) for i in range(1, 121)}  # 120 records over the first 14 hours


@pytest.fixture
def scn(kafka: KafkaCluster, tmp_path: Path) -> Scenario:
    return Scenario(tmp_path, kafka.bootstrap)


def loss(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The reconciliation's findings, without the audit's."""
    return [f for f in result["findings"] if f["kind"] not in ("config_risk", "health")]


def rows(skip: set[int] = frozenset()) -> list[tuple[int, Any]]:  # type: ignore[assignment]
    return [(i, t) for i, t in ROWS.items() if i not in skip]


def test_clean_run_has_no_finding(scn: Scenario, spark: Any) -> None:
    scn.upstream(ROWS)
    scn.produce(rows())
    scn.sink(rows())
    r = scn.reconcile(spark)
    assert (r["status"], findings(r), r["replays_consistent"]) == ("ok", [], True)
    assert [t["count"] for t in r["tiers"]] == [120, 120, 120]


def test_write_side_loss_is_located_before_the_topic(scn: Scenario, spark: Any) -> None:
    lost = {5, 50, 99}
    scn.upstream(ROWS)
    scn.produce(rows(lost))
    scn.sink(rows(lost))
    r = scn.reconcile(spark)
    assert findings(r) == [("loss", "write", "db->topic", 3)]
    assert scn.ids(loss(r)[0]["ids"]) == lost


def test_consume_side_loss_is_located_after_the_topic(scn: Scenario, spark: Any) -> None:
    lost = {1, 2, 3, 4}
    scn.upstream(ROWS)
    scn.produce(rows())
    scn.sink(rows(lost))
    r = scn.reconcile(spark)
    assert findings(r) == [("loss", "consume", "topic->sink", 4)]
    assert scn.ids(loss(r)[0]["ids"]) == lost
    assert loss(r)[0]["buckets"] == [at(0).strftime("%Y-%m-%dT%H:%M:%SZ")]


def test_loss_on_both_sides_is_split_by_hop(scn: Scenario, spark: Any) -> None:
    write, consume = {10, 11}, {60, 61, 62}
    scn.upstream(ROWS)
    scn.produce(rows(write))
    scn.sink(rows(write | consume))
    r = scn.reconcile(spark)
    assert findings(r) == [("loss", "consume", "topic->sink", 3),
                           ("loss", "write", "db->topic", 2)]
    by_hop = {f["hop"]: scn.ids(f["ids"]) for f in loss(r)}
    assert by_hop == {"db->topic": write, "topic->sink": consume}


def test_duplicates_in_the_topic_are_the_write_sides(scn: Scenario, spark: Any) -> None:
    twice = [(i, ROWS[i]) for i in (7, 8, 9)]
    scn.upstream(ROWS)
    scn.produce(rows() + twice)      # producer retries without idempotence
    scn.sink(rows() + twice)         # the consumer faithfully copies both
    r = scn.reconcile(spark)
    assert findings(r) == [("duplicate", "write", "db->topic", 3)]
    assert scn.ids(loss(r)[0]["ids"]) == {7, 8, 9}
    # the replays leave their distinct ids to the reconcile's one grouping by id, and every
    # replay's figure in replays.json and the result is the topic's own: 3 ids read twice
    topic = next(t for t in r["tiers"] if t["name"] == "topic")
    assert (topic["count"], topic["distinct"]) == (len(ROWS) + 3, len(ROWS))
    assert [(p["count"], p["distinct"]) for p in r["replays"]] == [(len(ROWS) + 3, len(ROWS))] * 2
    replays = json.loads((scn.out / "replays.json").read_text())
    assert [p["distinct"] for t in replays["topics"] for p in t["replays"]] == [len(ROWS)] * 2


def test_duplicates_only_in_the_sink_are_the_consume_sides(scn: Scenario, spark: Any) -> None:
    scn.upstream(ROWS)
    scn.produce(rows())
    scn.sink(rows() + [(20, ROWS[20]), (21, ROWS[21])])  # reprocessed after a rebalance
    r = scn.reconcile(spark)
    assert findings(r) == [("duplicate", "consume", "topic->sink", 2)]
    assert scn.ids(loss(r)[0]["ids"]) == {20, 21}


def test_rows_nobody_produced_are_unexpected_in_the_sink(scn: Scenario, spark: Any) -> None:
    scn.upstream(ROWS)
    scn.produce(rows())
    scn.sink(rows() + [(9001, at(30)), (9002, at(31))])  # written by someone else
    r = scn.reconcile(spark)
    assert findings(r) == [("unexpected", "consume", "topic->sink", 2)]
    assert scn.ids(loss(r)[0]["ids"]) == {9001, 9002}


def test_records_arriving_inside_grace_are_late_not_lost(scn: Scenario, spark: Any) -> None:
    from datetime import timedelta

    late = {i: END - timedelta(minutes=i) for i in (1001, 1002, 1003)}
    too_late = {2001: END - timedelta(minutes=2)}
    scn.upstream({**ROWS, **late, **too_late})
    scn.produce(rows())
    scn.produce(list(late.items()), arrival=END + timedelta(minutes=5))       # inside 10m grace
    scn.produce(list(too_late.items()), arrival=END + timedelta(minutes=30))  # after grace
    scn.sink(rows() + list(late.items()))
    r = scn.reconcile(spark)
    assert r["status"] == "findings"  # the one record past grace is lost; late ones are not
    assert findings(r) == [("late", "write", "db->topic", 3), ("loss", "write", "db->topic", 1)]
    by_kind = {f["kind"]: scn.ids(f["ids"]) for f in loss(r)}
    assert by_kind == {"late": set(late), "loss": set(too_late)}


def test_records_sent_after_grace_are_lost_and_their_cause_says_they_came_late(
        scn: Scenario, spark: Any) -> None:
    from datetime import timedelta

    # made in the window's last minutes, sent 12 and 13 minutes after its end: past the 10m
    # grace, inside the 5m disorder margin the replay reads beyond it; the consumer then wrote
    # them to the sink, as it does any record
    late = {3001: END - timedelta(minutes=3), 3002: END - timedelta(minutes=1)}
    scn.upstream({**ROWS, **late})
    scn.produce(rows())
    scn.produce([(3001, late[3001])], arrival=END + timedelta(minutes=12))
    scn.produce([(3002, late[3002])], arrival=END + timedelta(minutes=13))
    scn.sink(rows() + list(late.items()))
    r = scn.reconcile(spark)
    # lost by the window's rule, on the write side only: the sink's copies are no surprise
    assert findings(r) == [("loss", "write", "db->topic", 2)]
    lost = loss(r)[0]
    assert scn.ids(lost["ids"]) == set(late)
    why = lost["cause"]
    assert (why["code"], why["confidence"]) == ("arrived_after_grace", "likely")
    closed = (END + timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert why["evidence"][0] == (
        "2 of the 2 lost record(s) are in the topic, with Kafka timestamps "
        f"{(END + timedelta(minutes=12)).strftime('%Y-%m-%dT%H:%M:%SZ')} - "
        f"{(END + timedelta(minutes=13)).strftime('%Y-%m-%dT%H:%M:%SZ')}: after its grace "
        f"closed at {closed}")
    assert "the last 180 s after" in why["summary"]


def test_a_loss_partly_sent_late_keeps_its_other_cause_and_says_which_came_late(
        scn: Scenario, spark: Any) -> None:
    from datetime import timedelta

    never = {5, 6}  # never sent
    late = {3001: END - timedelta(minutes=3)}
    scn.upstream({**ROWS, **late})
    scn.produce(rows(never))
    scn.produce(list(late.items()), arrival=END + timedelta(minutes=12))
    scn.sink(rows(never) + list(late.items()))
    r = scn.reconcile(spark)
    assert findings(r) == [("loss", "write", "db->topic", 3)]
    why = loss(r)[0]["cause"]
    assert why["code"] != "arrived_after_grace"
    assert why["evidence"][-1].startswith("1 of the 3 lost record(s) are in the topic")


def test_retention_that_deleted_part_of_the_window_is_inconclusive(
        kafka: KafkaCluster, tmp_path: Path, spark: Any) -> None:
    scn = Scenario(tmp_path, kafka.bootstrap, partitions=1, groups=["loader"])
    scn.upstream(ROWS)
    scn.produce(rows(), partition=0)
    scn.sink(rows()[:10])
    # the production group had consumed only 10 records when the log start moved to 30;
    # DeleteRecords advances the log start offset exactly as retention does
    commit_offset(kafka.bootstrap, "loader", scn.topic, 0, 10)
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for fut in admin.delete_records([TopicPartition(scn.topic, 0, 30)]).values():
        fut.result(30)
    r = scn.reconcile(spark)
    assert r["status"] == "inconclusive"
    assert any("retention already deleted the start of the window" in x for x in r["reasons"])
    retention = [f for f in r["findings"]
                 if (f.get("cause") or {}).get("code") == "retention_deleted_unread"]
    assert [(f["side"], f["count"], f["group"]) for f in retention] == [("consume", 20, "loader")]
    assert scn.ids(retention[0]["ids"]) == {i for i, _ in rows()[10:30]}
    # deleted, not lost on the way in: no write-side loss; the 90 still unread are missing
    assert findings(r) == [("loss", "consume", "topic->sink", 20),
                           ("loss", "consume", "topic->sink", 90)]


def test_aborted_transactions_read_committed_are_not_loss(scn: Scenario, spark: Any,
                                                          kafka: KafkaCluster) -> None:
    tx = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": scn.topic})
    tx.init_transactions(30)
    committed, aborted = rows()[:80], rows()[80:]
    # Markers carry the broker's time (now), records their backdated CreateTime: kept in
    # separate partitions so the window's end offset, found by time, lies after each marker.
    tx.begin_transaction()
    scn.produce(aborted, producer=tx, partition=0)
    tx.flush(30)
    tx.abort_transaction(30)
    tx.begin_transaction()
    scn.produce(committed[:40], producer=tx, partition=1)
    scn.produce(committed[40:], producer=tx, partition=2)
    tx.commit_transaction(30)
    scn.upstream(dict(committed))     # the upstream only kept what committed
    scn.sink(committed)
    r = scn.reconcile(spark)
    assert (r["status"], findings(r)) == ("ok", [])
    topic = r["tiers"][1]
    assert topic["count"] == 80
    assert topic["estimate"] > 80, "offsets count aborted records and markers: only an estimate"


def test_postgresql_tiers_are_read_by_spark_over_jdbc(kafka: KafkaCluster, tmp_path: Path,
                                                      spark: Any, postgres: Any) -> None:
    name = tmp_path.name.lower().replace("-", "_")[-40:]
    scn = Scenario(tmp_path, kafka.bootstrap, up_url=postgres.create_database(f"up_{name}"),
                   down_url=postgres.create_database(f"down_{name}"))
    write, consume = {3}, {40, 41}
    scn.upstream(ROWS)
    scn.produce(rows(write))
    scn.sink(rows(write | consume))
    r = scn.reconcile(spark)
    assert findings(r) == [("loss", "consume", "topic->sink", 2),
                           ("loss", "write", "db->topic", 1)]
    assert {f["hop"]: scn.ids(f["ids"]) for f in loss(r)} == {
        "db->topic": write, "topic->sink": consume}


def test_count_only_upstream_is_compared_per_bucket(scn: Scenario, spark: Any) -> None:
    counts = ("SELECT substr(ts, 1, 13) || ':00:00' AS bucket, COUNT(*) AS count FROM src "
              "WHERE ts >= :start AND ts < :end GROUP BY 1")
    text = scn.config.read_text().replace(
        'ids: "SELECT id, ts AS event_time FROM src WHERE ts >= :start AND ts < :end"',
        f'counts: "{counts}"')
    scn.config.write_text(text)
    lost = {2, 3}  # both in the first hour
    scn.upstream(ROWS)
    scn.produce(rows(lost))
    scn.sink(rows(lost))
    r = scn.reconcile(spark)
    assert findings(r) == [("loss", "write", "db->topic", 2)]
    (f,) = [f for f in r["findings"] if f["kind"] == "loss"]
    assert f["ids"] is None, "a count-only end cannot name ids"
    assert f["buckets"] == [at(0).strftime("%Y-%m-%dT%H:%M:%SZ")]
    assert r["hops"][0]["exact"] is False and r["hops"][1]["exact"] is True

