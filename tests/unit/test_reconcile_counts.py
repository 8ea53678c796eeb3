from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kafka_recon.config import load_flow
from kafka_recon.pipeline import DEFAULT_CONFIG
from kafka_recon.reconcile import reconcile_counts, verdict
from kafka_recon.window import Window

pytestmark = pytest.mark.unit

FLOW = load_flow(DEFAULT_CONFIG, "demo_orders")
WINDOW = Window.parse("2026-11-20T00:00:00Z", "2026-11-21T00:00:00Z", FLOW.grace)
LATER = datetime(2026, 11, 22, tzinfo=UTC)


def replay(count: int, distinct: int | None = None, fp: str = "f", group: str = "g1") -> dict:
    return {"group": group, "read": count, "count": count,
            "distinct": count if distinct is None else distinct,
            "unidentifiable": 0, "fingerprint": fp}


def run(up: int, topic: dict, sink: int, sink_distinct: int | None = None) -> dict:
    tiers = [{"name": "orders_db", "count": up, "distinct": up},
             {"name": "warehouse", "count": sink,
              "distinct": sink if sink_distinct is None else sink_distinct}]
    return reconcile_counts(FLOW, WINDOW, tiers, topic, now=LATER)


def test_equal_counts_everywhere_is_ok() -> None:
    r = run(100, {"tier": "orders_topic", "replays": [replay(100), replay(100, group="g2")]}, 100)
    assert r["status"] == "ok" and r["findings"] == []
    assert "every record accounted for" in verdict(r)


def test_loss_after_the_topic_is_consume_side() -> None:
    r = run(100, {"tier": "orders_topic", "replays": [replay(100)]}, 88)
    assert r["status"] == "findings"
    assert [(f["kind"], f["side"], f["hop"], f["count"]) for f in r["findings"]] == [
        ("loss", "consume", "orders_topic->warehouse", 12)]


def test_loss_before_the_topic_is_write_side_and_not_counted_again_downstream() -> None:
    r = run(100, {"tier": "orders_topic", "replays": [replay(90)]}, 90)
    assert [(f["kind"], f["side"], f["count"]) for f in r["findings"]] == [("loss", "write", 10)]


def test_duplicates_first_seen_in_the_sink_belong_to_the_consume_hop() -> None:
    r = run(100, {"tier": "orders_topic", "replays": [replay(100)]}, 104, sink_distinct=100)
    assert [(f["kind"], f["side"], f["count"]) for f in r["findings"]] == [
        ("duplicate", "consume", 4)]


def test_replays_that_disagree_make_the_run_inconclusive() -> None:
    r = run(100, {"tier": "orders_topic",
                  "replays": [replay(100), replay(97, fp="other", group="g2")]}, 100)
    assert r["status"] == "inconclusive" and not r["replays_consistent"]
    assert any(f["kind"] == "replay_unstable" for f in r["findings"])


def test_open_window_is_inconclusive_never_ok() -> None:
    tiers = [{"name": "orders_db", "count": 1, "distinct": 1},
             {"name": "warehouse", "count": 1, "distinct": 1}]
    r = reconcile_counts(FLOW, WINDOW, tiers, {"tier": "orders_topic", "replays": [replay(1)]},
                         now=datetime(2026, 11, 21, 0, 5, tzinfo=UTC))
    assert r["status"] == "inconclusive"
    assert "records may still arrive" in r["reasons"][0]
