"""The flight recorder's timeline: events read from consecutive snapshots in its store."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from kafka_recon.cluster import recorder
from kafka_recon.runfiles.flight import Timeline
from kafka_recon.stores import snapshots
from kafka_recon.window import iso_us

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)


def partition_row(at: str, leader: int, epoch: int | None, isr: str, log_start: int | None,
                  log_end: int | None, error: str | None) -> dict[str, object]:
    return {"flow": "f", "topic": "t", "taken_at": at, "partition": 0, "leader": leader,
            "leader_epoch": epoch, "replicas": "[1, 2, 3]", "isr": isr, "log_start": log_start,
            "log_end": log_end, "error": error}


def group_row(at: str, grp: str, committed: str, members: str, state: str | None = None
              ) -> dict[str, object]:
    return {"flow": "f", "topic": "t", "grp": grp, "taken_at": at, "state": state,
            "committed": committed, "members": members, "error": None}


def store(tmp_path: Path, states: list[tuple[int, int | None, list[int], int | None]],
          step_s: int = 60, members: list[list[dict[str, object]]] | None = None) -> Engine:
    """One snapshot per state (leader, epoch, isr, log_end) of partition 0, `step_s` apart."""
    eng = recorder.connect(tmp_path / "snapshots.db")
    for i, (leader, epoch, isr, log_end) in enumerate(states):
        at = iso_us(T0 + timedelta(seconds=i * step_s))
        snapshots.write(eng, snapshots.partition_snapshot, [partition_row(
            at, leader, epoch, json.dumps(isr), 0, log_end,
            None if log_end is not None or leader < 0 else "leader not available")])
        if members:
            snapshots.write(eng, snapshots.group_snapshot,
                            [group_row(at, "g", "{}", json.dumps(members[i]), "STABLE")])
    return eng


def events(con: Engine, minutes: int = 10) -> Timeline:
    return recorder.timeline(con, "f", "t", T0, T0 + timedelta(minutes=minutes))


def test_an_unclean_election_after_the_isr_shrank_is_two_events(tmp_path: Path) -> None:
    con = store(tmp_path, [(2, 5, [2, 3], 100), (2, 5, [2], 150), (2, 5, [2], 200),
                           (3, 6, [3], 160)] + [(3, 6, [2, 3], 170)] * 7)
    tl = events(con)
    kinds = [(e.event, e.clean) for e in tl.events]
    assert kinds == [("isr_shrink", None), ("leader_change", False), ("truncation", None)]
    change = tl.events[1]
    assert (change.from_, change.to, change.isr_before) == (2, 3, [2])
    assert change.between == ("2026-11-20T10:02:00Z", "2026-11-20T10:03:00Z")
    assert tl.events[2].log_end_before == 200 and tl.events[2].log_end_after == 160
    assert tl.covered


def test_a_spell_without_a_leader_is_one_offline_event(tmp_path: Path) -> None:
    con = store(tmp_path, [(1, 3, [1], 100), (-1, None, [1], None), (-1, None, [1], None),
                           (1, 4, [1], 100)] + [(1, 4, [1], 120)] * 7)
    tl = events(con)
    assert [e.event for e in tl.events] == ["offline"]
    assert tl.events[0].between == ("2026-11-20T10:00:00Z", "2026-11-20T10:03:00Z")


def test_a_leader_that_stops_answering_then_moves_is_offline_and_a_clean_change(
        tmp_path: Path) -> None:
    con = store(tmp_path, [(1, 3, [1, 2], 100), (1, 3, [1, 2], None), (2, 4, [2], 100)]
                + [(2, 4, [2], 110)] * 8)
    kinds = [(e.event, e.clean) for e in events(con).events]
    assert ("leader_change", True) in kinds and ("offline", None) in kinds


def test_a_window_the_snapshots_do_not_bracket_is_not_covered(tmp_path: Path) -> None:
    con = store(tmp_path, [(1, 3, [1], 100)] * 5)  # 10:00 to 10:04, the window runs to 10:10
    tl = events(con)
    assert tl.snapshots == 5 and not tl.covered and tl.events == []
    gappy = store(tmp_path / "b", [(1, 3, [1], 100)] * 3, step_s=20 * 60)
    assert not events(gappy, minutes=30).covered  # 20-minute gaps: more than MAX_GAP
    empty = recorder.connect(tmp_path / "none.db")
    assert recorder.timeline(empty, "f", "t", T0, T0 + timedelta(minutes=5)).snapshots == 0


def test_members_are_listed_once_with_every_partition_they_held(tmp_path: Path) -> None:
    a = {"member_id": "a", "client_id": "loader", "host": "/h1", "partitions": [0]}
    b = {"member_id": "b", "client_id": "other", "host": "/h2", "partitions": [1]}
    con = store(tmp_path, [(1, 3, [1], 100)] * 11,
                members=[[a]] * 3 + [[a, b]] * 8)
    members = events(con).members["g"]
    assert [(m.member_id, m.client_id, m.assignments) for m in members] == [
        ("a", "loader", [[0]]), ("b", "other", [[1]])]
    assert members[1].first_seen == "2026-11-20T10:03:00Z"


def test_snapshots_past_the_retention_are_forgotten(tmp_path: Path) -> None:
    con = store(tmp_path, [(1, 3, [1], 100)] * 3, step_s=3600)
    assert recorder.forget(con, T0 + timedelta(minutes=90)) == 2
    with con.connect() as c:
        assert c.execute(select(func.count()).select_from(
            snapshots.partition_snapshot)).scalar_one() == 1


def test_a_newer_epoch_under_the_same_leader_is_a_bounce_the_snapshots_missed(
        tmp_path: Path) -> None:
    con = store(tmp_path, [(2, 0, [2], 500), (2, 2, [2], 518)] + [(2, 2, [2], 600)] * 9)
    [e] = events(con).events
    assert (e.event, e.leader, e.epochs) == ("leader_bounced", 2, [0, 2])


def test_an_invalid_offset_during_an_election_is_not_a_truncation(tmp_path: Path) -> None:
    # a store written before invalid offsets were refused: -1001 is librdkafka's "no offset"
    con = store(tmp_path, [(1, 3, [1, 2], 555), (2, 4, [2], -1001)] + [(2, 4, [2], 600)] * 9)
    assert [e.event for e in events(con).events] == ["isr_shrink", "leader_change"]


def test_offsets_deleted_below_a_commit_are_remembered_after_the_reader_jumps_past_them(
        tmp_path: Path) -> None:
    """A paused mirror (commit 117) while retention moves the log start to 6001, then resumed:
    it resets to the log start and commits 6002. The snapshots in between keep the gap."""
    con = recorder.connect(tmp_path / "snapshots.db")
    for i, (low, commit, other) in enumerate([(0, 117, 50), (0, 117, 120), (6001, 117, 6001),
                                              (6001, 117, 6001), (6001, 6002, 6002)]):
        at = iso_us(T0 + timedelta(seconds=i * 60))
        snapshots.write(con, snapshots.partition_snapshot,
                        [partition_row(at, 1, 3, "[1]", low, 6002, None)])
        snapshots.write(con, snapshots.group_snapshot, [
            group_row(at, grp, json.dumps({"0": off}), "[]")
            for grp, off in (("mirror A->B", commit), ("loader", other))])
    tl = events(con)
    # the loader kept up: never below the log start, so never named
    assert tl.deleted_unread == {"mirror A->B": 6001 - 117}
    assert tl.as_json()["deleted_unread"] == {"mirror A->B": 5884}


def test_each_topic_of_a_flow_is_kept_under_its_name_and_a_repeated_name_under_its_tier(
        tmp_path: Path) -> None:
    from kafka_recon.config import load_flow

    config = tmp_path / "flows.yaml"
    config.write_text("""
flows:
  orders:
    owners: [o@example.com]
    record: {id: "$.id", event_time: "$.ts"}
    tiers:
      - {name: dc1, type: kafka, bootstrap: "a:9092", topic: orders}
      - {name: dc2, type: kafka, bootstrap: "b:9092", topic: orders, via: replication}
      - {name: enriched, type: kafka, bootstrap: "b:9092", topic: orders.enriched,
         via: process}
""")
    flow = load_flow(config, "orders")
    assert [recorder.key_of(flow, t) for t in flow.kafka_tiers] == [
        "orders", "orders@dc2", "orders.enriched"]
