"""Flows through several topics: the config's words (via, per-topic record, grace and
tolerance), the sides of each hop, the result's findings and causes, the mirror's audit and
the suites' per-hop tolerance."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from kafka_recon.cluster.audit import audit_mirror
from kafka_recon.config import Tolerance, load_flow
from kafka_recon.errors import ConfigError
from kafka_recon.result.build import where_of
from kafka_recon.runfolder import RunFolder
from kafka_recon.window import Window
from tests.factories import build_from_json as build_result
from tests.factories import hop as model_hop
from tests.factories import replay, result, tier
from tests.factories import validate_from_json as validate_result

pytestmark = pytest.mark.unit


CHAIN = """
flows:
  orders:
    owners: [a@example.com]
    grace: 10m
    record: {id: "$.order_id", event_time: "$.created_at"}
    tiers:
      - {name: db, type: sql, conn: "sqlite:///x.db",
         ids: "SELECT id, t AS event_time FROM o WHERE t >= :start AND t < :end"}
      - {name: regional, type: kafka, bootstrap: "a:9092", topic: orders}
      - {name: aggregate, type: kafka, bootstrap: "b:9092", topic: A.orders,
         via: replication, grace: 1h, tolerance: {duplicate: 50}}
      - {name: enriched, type: kafka, bootstrap: "b:9092", topic: orders-enriched,
         via: process, record: {id: "$.order.id", event_time: "$.order.at"}}
      - {name: sink, type: sql, conn: sink_db,
         ids: "SELECT id, t AS event_time FROM c WHERE t >= :start AND t < :end"}
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "flows.yaml"
    p.write_text(text)
    return p


def test_a_chain_of_topics_names_each_hop_by_how_records_cross_it(tmp_path: Path) -> None:
    flow = load_flow(write(tmp_path, CHAIN), "orders")
    assert [t.name for t in flow.kafka_tiers] == ["regional", "aggregate", "enriched"]
    assert flow.topic_tier.name == "regional"
    assert [flow.side_of(p) for p in ("db", "regional", "aggregate", "enriched")] == [
        "write", "replication", "process", "consume"]
    enriched = flow.kafka_tiers[2]
    assert flow.record_of(enriched).id == "$.order.id"
    assert flow.record_of(flow.kafka_tiers[1]).id == "$.order_id"
    assert flow.grace_of(flow.kafka_tiers[1]) == timedelta(hours=1)
    assert flow.grace_of(enriched) == timedelta(minutes=10)
    assert flow.longest_grace == timedelta(hours=1)
    assert flow.tolerance_into("aggregate").duplicate == 50
    assert flow.tolerance_into("enriched").duplicate == 0


def test_a_topic_after_a_topic_must_say_how_records_get_there(tmp_path: Path) -> None:
    text = CHAIN.replace("via: replication, ", "")
    with pytest.raises(ConfigError, match="tier 'aggregate' follows topic tier 'regional': "
                                          "say how records get there"):
        load_flow(write(tmp_path, text), "orders")


def test_via_without_a_topic_before_is_an_error(tmp_path: Path) -> None:
    text = CHAIN.replace('topic: orders}', 'topic: orders, via: process}')
    with pytest.raises(ConfigError, match="'via' names the hop from a topic tier right before"):
        load_flow(write(tmp_path, text), "orders")


@pytest.mark.parametrize("topic", ["mm2-offset-syncs.B.internal", "A.checkpoints.internal",
                                   "heartbeats", "A.heartbeats", "mm2-configs.A.internal"])
def test_mirrormaker_2s_own_topics_are_never_counted(tmp_path: Path, topic: str) -> None:
    text = CHAIN.replace("topic: A.orders", f"topic: {topic}")
    with pytest.raises(ConfigError, match="one of MirrorMaker 2's own topics"):
        load_flow(write(tmp_path, text), "orders")


def test_the_same_topic_twice_in_a_flow_is_an_error(tmp_path: Path) -> None:
    text = CHAIN.replace('bootstrap: "b:9092", topic: A.orders', 'bootstrap: "a:9092", '
                         'topic: orders')
    with pytest.raises(ConfigError, match="the same topic is named by two tiers: a:9092/orders"):
        load_flow(write(tmp_path, text), "orders")


DROPS = ('via: process, drops: {where: "status = \'test\'", fields: {status: "$.status"}}, '
         'record:')


def test_a_processors_declared_drops_are_read_over_the_topic_before_it(tmp_path: Path) -> None:
    flow = load_flow(write(tmp_path, CHAIN.replace("via: process, record:", DROPS)), "orders")
    regional, aggregate, enriched = flow.kafka_tiers
    assert flow.drops_after(aggregate) is enriched.drops
    assert enriched.drops is not None and enriched.drops.fields == {"status": "$.status"}
    assert flow.drops_after(regional) is None and flow.drops_after(enriched) is None


@pytest.mark.parametrize(("drops", "error"), [
    ('{where: "x", fields: {value: "$.v"}}', "field name 'value' is a column of the replay's"),
    ('{where: "x", fields: {Offset: "$.v"}}', "field name 'Offset' is a column"),
    ('{where: "x", fields: {v: "v"}}', "field 'v': expected a JSONPath"),
    ('{where: "x", fields: {}}', "fields"),
    ('{where: "", fields: {v: "$.v"}}', "where"),
])
def test_a_drop_declaration_that_cannot_be_read_is_a_config_error(
        tmp_path: Path, drops: str, error: str) -> None:
    text = CHAIN.replace("via: process, record:", f"via: process, drops: {drops}, record:")
    with pytest.raises(ConfigError, match=error):
        load_flow(write(tmp_path, text), "orders")


def test_drops_belong_to_a_processors_hop_only(tmp_path: Path) -> None:
    text = CHAIN.replace("via: replication, ", 'via: replication, drops: {where: "true", '
                                               'fields: {v: "$.v"}}, ')
    with pytest.raises(ConfigError, match="set via: process"):
        load_flow(write(tmp_path, text), "orders")


def test_drops_over_change_events_are_refused(tmp_path: Path) -> None:
    text = CHAIN.replace("via: process, record:", DROPS).replace(
        'topic: A.orders,', 'topic: A.orders, record: {id: "$.id", event_time: "$.t", '
                           'envelope: debezium},')
    with pytest.raises(ConfigError, match="tier 'aggregate' holds debezium change events"):
        load_flow(write(tmp_path, text), "orders")


# ------------------------------------------------------------------ the result of a chain
def _hop(a: str, b: str, side: str, n: int, miss: int = 0, dup: int = 0,
         **evidence: Any) -> dict[str, Any]:
    bucket = "2026-11-20T14:00:00Z"
    return {"from": a, "to": b, "side": side, "exact": True, "expected": n,
            "observed": n - miss, "missing": miss, "unexpected": 0, "duplicate": dup,
            "missing_ids": f"/run/missing/{a}__{b}.csv", "unexpected_ids": None,
            "duplicate_ids": f"/run/duplicate/{a}__{b}.csv",
            "buckets": {"missing": {bucket: miss}, "unexpected": {}, "duplicate": {bucket: dup},
                        "expected": {bucket: n}, "observed": {bucket: n - miss}}, **evidence}


def _topic(name: str, n: int, *fingerprints: str) -> dict[str, Any]:
    return {"tier": name, "estimate": n, "offsets": [], "committed": {},
            "replays": [{"group": f"{name}-g{i}", "read": n, "count": n, "distinct": n,
                         "unidentifiable": 0, "fingerprint": f}
                        for i, f in enumerate(fingerprints or ("1", "1"))]}


def _run(tmp_path: Path, hops: list[dict[str, Any]], topics: list[dict[str, Any]]
         ) -> dict[str, Any]:
    flow = load_flow(write(tmp_path, CHAIN), "orders")
    window = Window.parse("2026-11-20T00:00:00Z", "2026-11-21T00:00:00Z", flow.longest_grace)
    tiers = [{"name": n, "count": 100, "distinct": 100, "unidentifiable": 0}
             for n in ("db", "regional", "aggregate", "enriched", "sink")]
    return build_result(flow, window, {"tiers": tiers, "hops": hops}, {"topics": topics},
                        now=datetime(2026, 11, 22, tzinfo=UTC), out="/run").as_json()


RUN = {"runs": 1, "records": 40, "partitions": 1,
       "largest": [{"partition": 0, "first_offset": 500, "last_offset": 539, "records": 40,
                    "first_ts": None, "last_ts": None}]}
TOPICS = [_topic("regional", 100), _topic("aggregate", 100), _topic("enriched", 100)]


def test_a_mirrors_resent_run_is_a_replication_duplicate_with_its_cause(tmp_path: Path) -> None:
    r = _run(tmp_path, [_hop("db", "regional", "write", 100),
                        _hop("regional", "aggregate", "replication", 100, dup=40,
                             duplicate_runs=RUN),
                        _hop("aggregate", "enriched", "process", 100, miss=3),
                        _hop("enriched", "sink", "consume", 97)], TOPICS)
    got = {(f["kind"], f["hop"]): f for f in r["findings"]}
    dup = got["duplicate", "regional->aggregate"]
    # 40 copies against the hop's own tolerance of 50: reported, within tolerance
    assert (dup["side"], dup["count"], dup["within_tolerance"]) == ("replication", 40, True)
    assert dup["cause"]["code"] == "resent_after_restart"
    assert dup["cause"]["confidence"] == "likely"
    lost = got["loss", "aggregate->enriched"]
    # the flow's tolerance (0) on the process hop: a failure
    assert (lost["side"], lost["within_tolerance"]) == ("process", False)
    assert lost["cause"]["code"] == "unknown"  # no runs recorded: no mechanism claimed
    assert r["status"] == "findings"
    assert [x["tier"] for x in r["replays"]] == ["regional"] * 2 + ["aggregate"] * 2 + \
        ["enriched"] * 2


def test_each_tier_says_where_it_lives_a_topic_its_cluster_and_never_a_password(
        tmp_path: Path) -> None:
    r = _run(tmp_path, [_hop("db", "regional", "write", 100),
                        _hop("regional", "aggregate", "replication", 100),
                        _hop("aggregate", "enriched", "process", 100),
                        _hop("enriched", "sink", "consume", 100)], TOPICS)
    assert [t["where"] for t in r["tiers"]] == [
        "sqlite:///x.db", "topic 'orders' on kafka a:9092", "topic 'A.orders' on kafka b:9092",
        "topic 'orders-enriched' on kafka b:9092", "connection 'sink_db'"]
    flow = load_flow(write(tmp_path, CHAIN.replace(
        "conn: sink_db", 'conn: "postgresql://u:s3cret@pg:5432/dw"')), "orders")
    assert where_of(flow.points[-1].tier) == "postgresql://u:***@pg:5432/dw"


def test_a_processors_filtered_records_are_reported_apart_and_the_run_is_ok(
        tmp_path: Path) -> None:
    filtered = _hop("aggregate", "enriched", "process", 60, filtered=40,
                    filtered_ids="/run/filtered/aggregate__enriched.csv")
    r = _run(tmp_path, [_hop("db", "regional", "write", 100),
                        _hop("regional", "aggregate", "replication", 100), filtered,
                        _hop("enriched", "sink", "consume", 60)], TOPICS)
    hop = r["hops"][2]
    assert (hop["expected"], hop["filtered"], hop["filtered_ids"]) == (
        60, 40, "filtered/aggregate__enriched.csv")
    assert r["findings"] == [] and r["status"] == "ok"
    # a hop without declared drops says nothing of them
    assert "filtered" not in r["hops"][1] and "filtered_ids" not in r["hops"][1]


def test_a_run_of_the_source_skipped_by_the_mirror_points_at_it(tmp_path: Path) -> None:
    r = _run(tmp_path, [_hop("db", "regional", "write", 100),
                        _hop("regional", "aggregate", "replication", 100, miss=40,
                             missing_runs=RUN),
                        _hop("aggregate", "enriched", "process", 60),
                        _hop("enriched", "sink", "consume", 60)], TOPICS)
    lost = next(f for f in r["findings"] if f["kind"] == "loss")
    assert lost["cause"]["code"] == "skipped_between_topics"
    assert "partition 0, offsets 500-539" in lost["cause"]["evidence"][0]


def test_replays_of_the_mirrored_topic_that_disagree_name_that_topic(tmp_path: Path) -> None:
    topics = [_topic("regional", 100), _topic("aggregate", 100, "1", "2"),
              _topic("enriched", 100)]
    r = _run(tmp_path, [_hop("db", "regional", "write", 100),
                        _hop("regional", "aggregate", "replication", 100),
                        _hop("aggregate", "enriched", "process", 100),
                        _hop("enriched", "sink", "consume", 100)], topics)
    unstable = [f for f in r["findings"] if f["kind"] == "replay_unstable"]
    assert [(f["hop"], f["side"]) for f in unstable] == [("aggregate", "replication")]
    assert r["replays_consistent"] is False
    assert any("topic 'aggregate' changed while it was read" in x for x in r["reasons"])


# ------------------------------------------------------------------ the mirror's audit
RISKY = """
clusters = A, B
A->B.enabled = true
B->A.enabled = false
B.producer.acks = 1
errors.tolerance = all
A->B.sync.topic.configs.enabled = false
emit.checkpoints.enabled = false
"""
SAFE = """
clusters = A, B
A->B.enabled = true
replication.factor = 3
B.producer.acks = all
sync.group.offsets.enabled = true
"""


def _mirror_tier(tmp_path: Path, props: str) -> Any:
    (tmp_path / "mm2.properties").write_text(props)
    text = CHAIN.replace("via: replication,", "via: replication, "
                         "mirror_properties: mm2.properties,")
    return load_flow(write(tmp_path, text), "orders").kafka_tiers[1]


def test_a_mirrors_risky_settings_are_each_named_on_the_replication_side(
        tmp_path: Path) -> None:
    found = audit_mirror(_mirror_tier(tmp_path, RISKY), tmp_path)
    assert sorted(f.rule for f in found) == [
        "M1-mirror-acks", "M2-errors-tolerance", "M3-sync-topic-configs",
        "M4-mirror-replication-factor", "M5-offset-translation"]
    assert {f.side for f in found} == {"replication"}
    acks = next(f for f in found if f.rule == "M1-mirror-acks")
    assert (acks.observed, acks.where) == ("acks=1", "mm2.properties (A->B)")


def test_a_mirror_with_safe_settings_fires_no_rule(tmp_path: Path) -> None:
    assert audit_mirror(_mirror_tier(tmp_path, SAFE), tmp_path) == []


def test_a_mirror_file_with_no_replication_into_the_topic_is_an_error(tmp_path: Path) -> None:
    tier = _mirror_tier(tmp_path, "clusters = A, B\nA->B.enabled = false\n")
    with pytest.raises(ConfigError, match="no single enabled replication feeding topic "
                                               "'A.orders'"):
        audit_mirror(tier, tmp_path)


# ------------------------------------------------------------------ the suites
def test_a_hops_own_duplicate_tolerance_passes_the_suite_the_flows_would_fail(
        tmp_path: Path) -> None:
    res = result("orders", tiers=[tier("regional", 100), tier("aggregate", 130)],
                 hops=[model_hop("regional", "aggregate", "replication", 100, 100,
                                 duplicate=30)],
                 replays=[replay("g1", 100, "9", tier="regional"),
                          replay("g2", 100, "9", tier="regional"),
                          replay("g3", 130, "7", tier="aggregate"),
                          replay("g4", 130, "7", tier="aggregate")])
    flow_only = validate_result(res, RunFolder(tmp_path / "a"), Tolerance())
    assert flow_only["suites"]["recon_hops"]["success"] is False
    per_hop = validate_result(res, RunFolder(tmp_path / "b"), Tolerance(),
                              hop_tolerance={"regional->aggregate": Tolerance(duplicate=30)})
    assert per_hop["success"] is True
    # each topic's replays checked apart: two topics rightly hold different records
    assert set(per_hop["suites"]) == {"recon_hops", "recon_replays[regional]",
                                      "recon_replays[aggregate]"}


# ------------------------------------------------------------------ retention on a mirror
def test_records_deleted_before_the_mirror_copied_them_are_the_replication_hops_loss(
        tmp_path: Path) -> None:
    """The mirror resumed after retention and committed past the gap: the run's own reading
    of its commit says nothing, the flight recorder's sightings (5884 offsets) do."""
    flow = load_flow(write(tmp_path, CHAIN), "orders")
    window = Window.parse("2026-11-20T00:00:00Z", "2026-11-21T00:00:00Z", flow.longest_grace)
    start_ms = Window.millis(window.start)
    regional = {**_topic("regional", 60),
                "offsets": [{"partition": 0, "start": 6001, "end": 6002, "log_start": 6001,
                             "high_watermark": 6002, "first_timestamp": start_ms + 1000}],
                "committed": {"mirror A->B": {"0": 6002}}}
    tiers = [{"name": n, "count": c, "distinct": c, "unidentifiable": 0}
             for n, c in (("db", 6000), ("regional", 0), ("aggregate", 647),
                          ("enriched", 647), ("sink", 647))]
    hops = [_hop("db", "regional", "write", 6000, miss=6000),
            _hop("regional", "aggregate", "replication", 0),
            _hop("aggregate", "enriched", "process", 647),
            _hop("enriched", "sink", "consume", 647)]
    split = {"topic": "regional", "from": "db", "to": "aggregate", "missing_from_topic": 6000,
             "unread": 5353, "unread_ids": "/run/missing/retention.csv"}

    def run(seen: dict[str, int] | None, on: str = "regional") -> dict[str, Any]:
        return build_result(flow, window, {"tiers": tiers, "hops": hops, "retention": [split]},
                            {"topics": [regional, _topic("aggregate", 647),
                                        _topic("enriched", 647)]},
                            now=datetime(2026, 11, 22, tzinfo=UTC), out="/run",
                            flight={"topics": {on: {"deleted_unread": seen}}} if seen
                            else None).as_json()

    blind = run(None)  # without the recorder: a write-side loss, and the run cannot tell
    assert [(f["kind"], f["side"], f["count"]) for f in blind["findings"]] == [
        ("loss", "write", 6000)]
    # each topic has its own timeline: what the recorder saw on another topic says nothing here
    assert run({"mirror A->B": 5884}, on="aggregate")["findings"] == blind["findings"]
    r = run({"mirror A->B": 5884})
    [lost] = r["findings"]
    assert (lost["kind"], lost["side"], lost["hop"], lost["count"]) == (
        "loss", "replication", "regional->aggregate", 5353)
    assert lost["cause"]["code"] == "retention_deleted_unread"
    assert lost["ids"] == "missing/retention.csv"
    assert r["status"] == "inconclusive"
