"""build_result: findings, reasons and status from the reconcile step's aggregates, checked in
the JSON form owners and tools read (result.json)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kafka_recon.config import Tolerance
from kafka_recon.sources.topic import NO_COMMIT
from kafka_recon.window import Window
from tests.factories import build_from_json as build_result
from tests.factories import flow

pytestmark = pytest.mark.unit

FLOW = flow("demo")
WINDOW = Window.parse("2026-11-20T00:00:00Z", "2026-11-21T00:00:00Z", FLOW.grace)
LATER = datetime(2026, 11, 22, tzinfo=UTC)
B = "2026-11-20T14:00:00Z"


def tier(name: str, n: int, **kw: Any) -> dict[str, Any]:
    return {"name": name, "count": n, "distinct": n, "unidentifiable": 0, **kw}


def hop(a: str, b: str, side: str, exp: int, obs: int, miss: int = 0, unexp: int = 0,
        dup: int = 0) -> dict[str, Any]:
    return {"from": a, "to": b, "side": side, "exact": True, "expected": exp, "observed": obs,
            "missing": miss, "unexpected": unexp, "duplicate": dup,
            "missing_ids": f"/run/missing/{a}__{b}.csv", "unexpected_ids": None,
            "duplicate_ids": None,
            "buckets": {"missing": {B: miss}, "unexpected": {B: unexp}, "duplicate": {B: dup},
                        "expected": {B: exp}, "observed": {B: obs}}}


def topic(*counts: int, offsets: list[dict[str, Any]] | None = None,
          committed: dict[str, dict[str, int]] | None = None) -> dict[str, Any]:
    return {"topics": [{"tier": "orders_topic", "estimate": counts[0],
                        "offsets": offsets or [], "committed": committed or {},
                        "replays": [{"group": f"g{i}", "read": c, "count": c, "distinct": c,
                                     "unidentifiable": 0, "fingerprint": str(c)}
                                    for i, c in enumerate(counts)]}]}


def result(hops: list[dict[str, Any]], t: dict[str, Any], tiers: list[dict[str, Any]] | None = None,
           now: datetime = LATER) -> dict[str, Any]:
    tiers = tiers or [tier("orders_db", 100), tier("orders_topic", 100), tier("warehouse", 100)]
    return build_result(FLOW, WINDOW, {"tiers": tiers, "hops": hops}, t, now=now,
                        out="/run").as_json()


CLEAN = [hop("orders_db", "orders_topic", "write", 100, 100),
         hop("orders_topic", "warehouse", "consume", 100, 100)]


def test_clean_run_is_ok_with_no_finding() -> None:
    r = result(CLEAN, topic(100, 100))
    assert (r["status"], r["findings"], r["reasons"]) == ("ok", [], [])
    typed = build_result(FLOW, WINDOW, {"tiers": [], "hops": CLEAN}, topic(100, 100), now=LATER)
    assert "every record accounted for" in typed.verdict()


def test_loss_names_side_hop_bucket_and_relative_id_file() -> None:
    r = result([CLEAN[0], hop("orders_topic", "warehouse", "consume", 100, 88, miss=12)],
               topic(100))
    assert r["status"] == "findings"
    (f,) = r["findings"]
    assert (f["kind"], f["side"], f["hop"], f["count"]) == (
        "loss", "consume", "orders_topic->warehouse", 12)
    assert f["ids"] == "missing/orders_topic__warehouse.csv" and f["buckets"] == [B]


def test_loss_within_tolerance_is_reported_but_the_run_is_ok() -> None:
    flow = FLOW.model_copy(update={"tolerance": FLOW.tolerance.model_copy(update={"loss": 20})})
    r = build_result(flow, WINDOW, {"tiers": [], "hops": [
        hop("orders_topic", "warehouse", "consume", 100, 88, miss=12)]}, topic(100),
        now=LATER).as_json()
    assert r["status"] == "ok" and r["findings"][0]["within_tolerance"] is True


@pytest.mark.parametrize(("tolerance", "missing", "status", "allowed"), [
    ("1%", 10, "ok", 10),        # 1% of 1,000 expected
    ("1%", 11, "findings", 10),
    ("0.05%", 1, "findings", 0),  # 0.05% of 1,000 is half a record: none allowed
    (0, 1, "findings", 0),
])
def test_a_loss_tolerance_as_a_percentage_of_the_hops_expected_records(
        tolerance: object, missing: int, status: str, allowed: int) -> None:
    flow = FLOW.model_copy(update={"tolerance": Tolerance(loss=tolerance)})
    r = build_result(flow, WINDOW, {"tiers": [], "hops": [
        hop("orders_topic", "warehouse", "consume", 1000, 1000 - missing, miss=missing)]},
        topic(1000), now=LATER).as_json()
    [f] = r["findings"]
    assert (r["status"], f["allowed"], f["within_tolerance"]) == (
        status, allowed, status == "ok")


def test_unexpected_records_have_a_tolerance_of_their_own() -> None:
    flow = FLOW.model_copy(update={"tolerance": Tolerance(unexpected="10%")})
    r = build_result(flow, WINDOW, {"tiers": [], "hops": [
        hop("orders_topic", "warehouse", "consume", 100, 105, unexp=5)]}, topic(100),
                     now=LATER).as_json()
    [f] = r["findings"]
    assert (f["kind"], f["allowed"], r["status"]) == ("unexpected", 10, "ok")


def test_late_records_are_a_finding_but_not_a_failure() -> None:
    tiers = [tier("orders_db", 100), tier("orders_topic", 100, late=3,
                                           late_file="/run/late/orders_topic.csv"),
             tier("warehouse", 100)]
    r = result(CLEAN, topic(100), tiers)
    assert r["status"] == "ok"
    assert [(f["kind"], f["hop"], f["count"], f["ids"]) for f in r["findings"]] == [
        ("late", "orders_db->orders_topic", 3, "late/orders_topic.csv")]


def test_unidentifiable_records_are_counted_never_dropped() -> None:
    tiers = [tier("orders_db", 100), tier("orders_topic", 100, unidentifiable=2),
             tier("warehouse", 100)]
    r = result(CLEAN, topic(100), tiers)
    assert r["status"] == "findings"
    assert [(f["kind"], f["side"], f["count"]) for f in r["findings"]] == [
        ("unidentifiable", "write", 2)]


def test_disagreeing_replays_make_the_run_inconclusive() -> None:
    r = result(CLEAN, topic(100, 97))
    assert r["status"] == "inconclusive" and not r["replays_consistent"]
    assert any(f["kind"] == "replay_unstable" for f in r["findings"])


def test_open_window_is_inconclusive_never_ok() -> None:
    r = result(CLEAN, topic(100), now=datetime(2026, 11, 21, 0, 5, tzinfo=UTC))
    assert r["status"] == "inconclusive" and "records may still arrive" in r["reasons"][0]


def test_retention_past_the_window_start_is_inconclusive() -> None:
    start_ms = Window.millis(WINDOW.start)
    offsets = [{"partition": 0, "start": 50, "end": 150, "log_start": 50, "high_watermark": 150,
                "first_timestamp": start_ms + 1000},
               {"partition": 1, "start": 10, "end": 90, "log_start": 5, "high_watermark": 90,
                "first_timestamp": start_ms - 1000}]
    r = result(CLEAN, topic(100, offsets=offsets))
    assert r["status"] == "inconclusive"
    assert "partitions [0]" in r["reasons"][0]


def code(finding: dict[str, Any]) -> str | None:
    """The finding's cause code (result.causes)."""
    return (finding.get("cause") or {}).get("code")


def test_group_behind_log_start_is_consume_side_loss_to_retention() -> None:
    offsets = [{"partition": 0, "start": 0, "end": 100, "log_start": 40, "high_watermark": 100,
                "first_timestamp": 0}]
    committed = {"orders-loader": {"0": 25}, "never-committed": {"0": NO_COMMIT}}
    r = result(CLEAN, topic(100, offsets=offsets, committed=committed))
    assert r["status"] == "inconclusive"
    (f,) = [f for f in r["findings"] if code(f) == "retention_deleted_unread"]
    assert (f["side"], f["hop"], f["count"], f["group"]) == (
        "consume", "orders_topic->warehouse", 15, "orders-loader")


def test_out_of_order_kafka_timestamps_make_the_run_inconclusive_not_a_loss() -> None:
    t = topic(8, 8)
    for r in t["topics"][0]["replays"]:
        r["out_of_order"] = 3
    r = result([hop("orders_db", "orders_topic", "write", 100, 8, miss=92),
                hop("orders_topic", "warehouse", "consume", 8, 8)], t)
    assert r["status"] == "inconclusive"
    assert "3 record(s) between the offsets replayed for the window carry Kafka timestamps " \
           "outside it" in r["reasons"][0]


def _retention_run(unread: int, missing_from_topic: int = 40, write_missing: int = 40,
                   committed_at: int = 10) -> dict[str, Any]:
    """Retention moved the log start to 40 while the group had committed `committed_at`."""
    start_ms = Window.millis(WINDOW.start)
    offsets = [{"partition": 0, "start": 40, "end": 100, "log_start": 40, "high_watermark": 100,
                "first_timestamp": start_ms + 1000}]
    hops = [hop("orders_db", "orders_topic", "write", 100, 60, miss=write_missing),
            hop("orders_topic", "warehouse", "consume", 60, 60)]
    split = {"topic": "orders_topic", "from": "orders_db", "to": "warehouse",
             "missing_from_topic": missing_from_topic,
             "unread": unread, "unread_ids": "/run/missing/retention.csv"}
    t = topic(60, offsets=offsets, committed={"orders-loader": {"0": committed_at}})
    return build_result(FLOW, WINDOW, {"tiers": [tier("orders_db", 100),
                                                 tier("orders_topic", 60),
                                                 tier("warehouse", 70)],
                                       "hops": hops, "retention": [split]}, t, now=LATER,
                        out="/run").as_json()


def test_records_deleted_by_retention_are_the_groups_loss_not_a_write_side_loss() -> None:
    r = _retention_run(unread=28)  # 30 offsets deleted unread, 2 of them processed uncommitted
    kinds = [(f["kind"], f["side"], f["hop"], f["count"], code(f)) for f in r["findings"]]
    assert kinds == [("loss", "consume", "orders_topic->warehouse", 28,
                      "retention_deleted_unread")]
    assert r["findings"][0]["cause"]["confidence"] == "likely"
    (f,) = r["findings"]
    assert (f["ids"], f["offsets"]) == ("missing/retention.csv", 30)
    assert r["status"] == "inconclusive"
    assert any("12 had been consumed into 'warehouse', 28 never were" in x for x in r["reasons"])


def test_more_records_gone_than_offsets_deleted_unread_keeps_the_write_side_loss() -> None:
    r = _retention_run(unread=35)  # 5 more than retention can explain: never written
    kinds = sorted((f["kind"], f["side"], code(f)) for f in r["findings"])
    assert kinds == [("loss", "consume", "retention_deleted_unread"),
                     ("loss", "write", "unknown")]
    assert any("cannot be told apart" in x for x in r["reasons"])


def test_a_group_that_read_everything_before_deletion_explains_the_whole_gap() -> None:
    r = _retention_run(unread=0, committed_at=100)
    assert [f for f in r["findings"] if f["kind"] == "loss"] == []
    assert r["status"] == "inconclusive"  # the window start is still gone from the topic


def test_a_sink_holding_every_deleted_record_lost_nothing_to_retention() -> None:
    r = _retention_run(unread=0)  # the group's offsets lag, but the sink has every record
    assert [f for f in r["findings"] if f["kind"] == "loss"] == []
    assert any("holds every record retention deleted" in x for x in r["reasons"])


OUTSIDE = {"bound": "2026-11-19T23:55:00Z", "first": "2026-11-19T23:54:30Z",
           "last": "2026-11-19T23:54:40Z"}


def test_lost_records_the_search_finds_before_the_read_are_withdrawn_and_not_judged() -> None:
    write = {**hop("orders_db", "orders_topic", "write", 100, 97, miss=3),
             "missing_before_read": {**OUTSIDE, "records": 3}}
    r = result([write, hop("orders_topic", "warehouse", "consume", 97, 97)], topic(97, 97))
    assert r["status"] == "inconclusive"
    assert [f for f in r["findings"] if f["kind"] == "loss"] == []
    [reason] = r["reasons"]
    assert reason.startswith("3 of the 3 record(s) missing from topic 'orders_topic' are in it "
                             "before the offsets replayed for the window "
                             "(stamped_out_of_order): stamped 2026-11-19T23:54:30Z - "
                             "2026-11-19T23:54:40Z, earlier than its start less the disorder "
                             "margin (2026-11-19T23:55:00Z)"), reason


def test_a_loss_only_partly_found_before_the_read_keeps_the_rest_and_says_so() -> None:
    write = {**hop("orders_db", "orders_topic", "write", 100, 95, miss=5),
             "missing_before_read": {**OUTSIDE, "records": 2}}
    r = result([write, hop("orders_topic", "warehouse", "consume", 95, 95)], topic(95, 95))
    assert r["status"] == "inconclusive"
    [lost] = [f for f in r["findings"] if f["kind"] == "loss"]
    assert lost["count"] == 5
    assert lost["cause"]["evidence"][-1].startswith(
        "2 of the 5 lost record(s) are in the topic before the offsets replayed"), lost
