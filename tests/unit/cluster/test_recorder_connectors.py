"""The flight recorder's connector snapshots read back as events: spells a connector did not
run or its cluster did not answer, a source's offsets deleted or its tables read again, a
sink's offsets moved back, or forward while stopped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kafka_recon.cluster.recorder import ConnectorState, connector_events

pytestmark = pytest.mark.unit

T0 = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
STREAMING = [{"partition": {"server": "shop"}, "offset": {"lsn": 900, "txId": 7}}]
SNAPSHOT = [{"partition": {"server": "shop"},
             "offset": {"lsn": 950, "snapshot": "INITIAL", "last_snapshot_record": True}}]


def sink(offset: int) -> list[dict[str, Any]]:
    return [{"partition": {"kafka_topic": "t", "kafka_partition": 0},
             "offset": {"kafka_offset": offset}}]


def states(*rows: tuple[str | None, list[dict[str, Any]], str | None]) -> list[ConnectorState]:
    return [ConnectorState(T0 + timedelta(minutes=5 * i), state, offsets, error)
            for i, (state, offsets, error) in enumerate(rows)]


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["event"] for e in events]


def test_a_running_connector_shows_nothing() -> None:
    assert connector_events(states(("RUNNING", sink(5), None), ("RUNNING", sink(9), None))) \
        == []


def test_a_source_stopped_its_offsets_deleted_then_snapshotting_again() -> None:
    ev = connector_events(states(("RUNNING", STREAMING, None), ("STOPPED", STREAMING, None),
                                 ("STOPPED", [], None), ("RUNNING", SNAPSHOT, None)))
    assert kinds(ev) == ["not_running", "offsets_reset"]
    assert ev[0]["state"] == "STOPPED" and ev[0]["between"] == ["2026-12-05T10:00:00Z",
                                                                "2026-12-05T10:15:00Z"]
    # seen without the empty snapshot between: streaming, then a snapshot again
    ev = connector_events(states(("RUNNING", STREAMING, None), ("RUNNING", SNAPSHOT, None)))
    assert kinds(ev) == ["snapshot_again"]


def test_a_sinks_offsets_moved_back_and_forward_while_stopped() -> None:
    ev = connector_events(states(("RUNNING", sink(100), None), ("STOPPED", sink(100), None),
                                 ("STOPPED", sink(40), None), ("STOPPED", sink(300), None),
                                 ("RUNNING", sink(300), None)))
    assert kinds(ev) == ["not_running", "offsets_rewound", "offsets_altered"]
    assert (ev[1]["before"], ev[1]["after"], ev[2]["before"], ev[2]["after"]) == \
        (100, 40, 40, 300)


def test_a_sink_that_moves_forward_while_running_is_just_loading() -> None:
    assert connector_events(states(("STOPPED", sink(10), None), ("RUNNING", sink(90), None))
                            ) == [{"event": "not_running", "state": "STOPPED",
                                   "between": ["2026-12-05T10:00:00Z",
                                               "2026-12-05T10:05:00Z"]}]


def test_a_cluster_that_did_not_answer_is_a_spell_of_its_own_not_a_state() -> None:
    ev = connector_events(states(("RUNNING", sink(10), None), (None, [], "refused"),
                                 (None, [], "refused"), ("RUNNING", sink(50), None)))
    assert ev == [{"event": "no_answer", "between": ["2026-12-05T10:00:00Z",
                                                     "2026-12-05T10:15:00Z"]}]


def test_a_failed_task_counts_as_the_connector_not_running() -> None:
    from kafka_recon.cluster.recorder import _worst

    assert _worst("RUNNING", [{"state": "RUNNING"}, {"state": "FAILED"}]) == "FAILED"
    assert _worst("RUNNING", [{"state": "RUNNING"}]) == "RUNNING"
