"""replays.json: distinct ids left by the replay are filled from the reconcile's count."""

from __future__ import annotations

import pytest

from kafka_recon.runfiles.replays import FirstRead, ReplayRun, Replays, TopicReplays

pytestmark = pytest.mark.unit


def _run(group: str, distinct: int | None, **kw: object) -> ReplayRun:
    return ReplayRun(group=group, read=12, count=10, distinct=distinct, unidentifiable=0,
                     out_of_order=0, **kw)


def _topic(tier: str, runs: list[ReplayRun]) -> TopicReplays:
    return TopicReplays(tier=tier, offsets=[], read_offsets=[], disorder_seconds=0, estimate=10,
                        committed={}, grace_seconds=0, replays=runs)


def test_replays_that_left_their_distinct_ids_take_each_topics_count_and_keep_their_own() -> None:
    replays = Replays(topics=[
        _topic("a", [_run("g1", None), _run("g2", None, same_records=True)]),
        # a later replay that read other records counted its own: kept as it is
        _topic("b", [_run("h1", None), _run("h2", 7, same_records=False,
                                            first_read=FirstRead(read=11))]),
    ])
    assert replays.uncounted()

    filled = replays.with_distinct({"a": 9, "b": 8})

    assert [[r.distinct for r in t.replays] for t in filled.topics] == [[9, 9], [8, 7]]
    assert not filled.uncounted()
    assert replays.uncounted()  # a copy: what was read stays as it was


def test_a_replay_file_written_with_every_distinct_count_needs_no_filling() -> None:
    assert not Replays(topics=[_topic("a", [_run("g1", 10)])]).uncounted()
