"""Producers whose clocks disagree, on a real broker: the window's offsets are found by Kafka
timestamp, and records stamped by a clock that runs behind or ahead of the others must not
fall out of them unseen. Each run is exact, or `inconclusive` naming the disorder; never a
false loss.

Three producers write into the same partitions in the order time passes; one's clock runs 30 s
behind, one's 30 s ahead (each clock is the timestamp it stamps: the broker only sees that).
The records' event times are the true times, as the upstream's rows hold them.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from harness.services.kafka import KafkaCluster
from tests.integration.engine_harness import END, START, Scenario, findings

pytestmark = pytest.mark.integration

SKEW = {"right": timedelta(0), "behind": timedelta(seconds=-30),
        "ahead": timedelta(seconds=30)}


def _sent(around: datetime, before: timedelta, after: timedelta
          ) -> list[tuple[datetime, str]]:
    """Every 15 s from `around - before` to `around + after`, the producers in turn."""
    steps = int((before + after).total_seconds() // 15)
    clocks = list(SKEW)
    return [(around - before + timedelta(seconds=15 * k), clocks[k % 3])
            for k in range(steps)]


def _fill(scn: Scenario) -> dict[str, set[int]]:
    """The upstream, the topic and the sink around the window's start and its end (past its
    close and margin); returns the ids each producer sent inside the window."""
    sent = _sent(START, timedelta(minutes=10), timedelta(minutes=10)) + \
        _sent(END, timedelta(minutes=10), timedelta(minutes=25))
    mine: dict[str, set[int]] = {c: set() for c in SKEW}
    window = {}
    for i, (t, clock) in enumerate(sent, start=1):
        # the true time is the event time; the producer stamps its own clock's
        scn.produce([(i, t)], arrival=t + SKEW[clock])
        if START <= t < END:
            window[i] = t
            mine[clock].add(i)
    scn.upstream(window)
    scn.sink(list(window.items()))
    return mine


def test_clocks_skewed_within_the_disorder_margin_hide_nothing(
        tmp_path: Path, kafka: KafkaCluster, spark: Any) -> None:
    scn = Scenario(tmp_path, kafka.bootstrap)
    mine = _fill(scn)
    result = scn.reconcile(spark)
    assert [f for f in findings(result) if f[0] != "late"] == [], result["findings"]
    assert not result["reasons"], result["reasons"]
    n = sum(len(ids) for ids in mine.values())
    assert {t["name"]: t["count"] for t in result["tiers"]} == {"db": n, "topic": n,
                                                               "sink": n}
    # the only records stamped at or after the end are the fast clock's last ones: they came
    # late by its clock, inside the grace, and count
    [late] = [f for f in result["findings"] if f["kind"] == "late"]
    assert scn.ids(late["ids"]) <= mine["ahead"] and late["count"] >= 1, late


def test_clocks_skewed_beyond_the_disorder_margin_make_the_run_inconclusive_not_a_loss(
        tmp_path: Path, kafka: KafkaCluster, spark: Any) -> None:
    """With a 10 s margin, the slow clock's records of the window sent in its first seconds
    are stamped before the start less the margin: the offsets found by timestamp may begin
    after them. The loss search finds them in the topic before the offsets replayed: not lost,
    and the run is not judged; it says why and what to raise."""
    scn = Scenario(tmp_path, kafka.bootstrap)
    scn.config.write_text(scn.config.read_text().replace("grace: 10m",
                                                         "grace: 10m\n    disorder: 10s"))
    mine = _fill(scn)
    result = scn.reconcile(spark)
    assert result["status"] == "inconclusive", result
    assert [f for f in findings(result) if f[0] != "late"] == [], result["findings"]
    n = sum(len(ids) for ids in mine.values())
    tiers = {t["name"]: t["count"] for t in result["tiers"]}
    assert tiers["db"] == tiers["sink"] == n and tiers["topic"] < n, tiers
    replays = json.loads((scn.out / "replays.json").read_text())
    hidden = n - tiers["topic"]
    said = [r for r in result["reasons"] if "before the offsets replayed" in r]
    assert said and said[0].startswith(f"{hidden} of the {hidden} record(s) missing"), said
    assert "(stamped_out_of_order)" in said[0]
    assert "raise the flow's disorder margin" in said[0]
    # or the read held some of them, stamped too early: either way the margin is named
    assert all("disorder margin" in r for r in result["reasons"]), result["reasons"]
    assert replays["topics"][0]["disorder_seconds"] == 10
