"""Each cause recogniser on small crafted evidence, with the ambiguous cases that must say
`possible` or `unknown`, never `likely`."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_recon.outputs.report import why
from kafka_recon.result import causes
from kafka_recon.result.causes import Evidence
from kafka_recon.result.model import Cause, Finding
from kafka_recon.runfiles.aggregates import HopBuckets, HopTally, PartitionSpan
from kafka_recon.runfiles.audit import Risk
from kafka_recon.runfiles.flight import Timeline
from kafka_recon.sources.topic import NO_COMMIT

pytestmark = pytest.mark.unit

TOPIC = "orders_topic"
SPANS = {"0": {"records": 100, "first_offset": 0, "last_offset": 99},
         "1": {"records": 100, "first_offset": 0, "last_offset": 99}}


def run(partition: int, first: int, last: int) -> dict[str, Any]:
    return {"partition": partition, "first_offset": first, "last_offset": last,
            "records": last - first + 1, "first_ts": None, "last_ts": None}


def runs(*rs: dict[str, Any]) -> dict[str, Any]:
    return {"runs": len(rs), "records": sum(r["records"] for r in rs),
            "partitions": len({r["partition"] for r in rs}), "largest": list(rs)}


def loss(hop: str = f"{TOPIC}->warehouse", side: str = "consume", count: int = 1,
         kind: str = "loss") -> dict[str, Any]:
    return {"kind": kind, "side": side, "hop": hop, "count": count}


def consume_loss(missing: dict[str, Any] | None, committed: dict[str, dict[int, int]],
                 audit: list[dict[str, Any]] | None = None,
                 spans: dict[str, Any] | None = None) -> dict[str, Any]:
    c = classify(loss(), {"missing_runs": missing},
                 ev(committed, audit, SPANS if spans is None else spans))
    assert c is not None
    return c


def ev(committed: dict[str, dict[int, int]] | None = None,
       audit: list[dict[str, Any]] | None = None, spans: dict[str, Any] | None = None,
       flight: dict[str, Any] | None = None, **more: Any) -> Evidence:
    """The typed evidence of crafted parts: an audit row needs only its rule and observed."""
    risks = [Risk(kind="config_risk", side="write", severity="high", seed="000", topic="t",
                  where="", recommended="", why="", fix="", blocking=False, **a)
             for a in audit or []]
    return Evidence(TOPIC, committed or {},
                    {p: PartitionSpan(**s) for p, s in (SPANS if spans is None
                                                        else spans).items()},
                    risks, Timeline.model_validate(flight or {}), **more)


def classify(finding: dict[str, Any], hop: dict[str, Any] | None, evidence: Evidence
             ) -> dict[str, Any] | None:
    """causes.classify on a crafted finding and a hop's evidence alone; the cause in the
    result's JSON form."""
    tally = None if hop is None else HopTally.model_validate({
        "from": "a", "to": "b", "side": finding["side"], "exact": True, "expected": 0,
        "observed": 0, "buckets": HopBuckets(), **hop})
    c = causes.classify(Finding.model_validate(finding), tally, evidence)
    return None if c is None else c.as_json()


AUTO_COMMIT = [{"rule": "C1-auto-commit", "observed": "enable.auto.commit=true"}]


def test_a_batch_below_the_groups_commit_is_commit_ahead_of_processing() -> None:
    c = consume_loss(runs(run(0, 20, 39)), {"loader": {0: 60, 1: 100}}, AUTO_COMMIT)
    assert (c["code"], c["confidence"]) == ("commit_ahead_of_processing", "likely")
    assert "partition 0, offsets 20-39 (20 record(s))" in c["evidence"][0]
    assert "all of them below the offsets group 'loader' committed" in c["evidence"]
    assert "the audit found enable.auto.commit=true (rule C1-auto-commit)" in c["evidence"]
    assert c["seed"] and c["fix"].startswith("Commit offsets only after")


def test_scattered_singles_below_the_commit_are_only_possible() -> None:
    c = consume_loss(runs(run(0, 3, 3), run(0, 17, 17), run(1, 50, 50)),
                     {"loader": {0: 60, 1: 100}})
    assert (c["code"], c["confidence"]) == ("commit_ahead_of_processing", "possible")
    assert any("scattered singles" in e for e in c["evidence"])


def test_with_several_groups_declared_the_feeding_group_is_not_known() -> None:
    c = consume_loss(runs(run(0, 20, 39)), {"loader": {0: 60}, "audit": {0: 10}})
    assert (c["code"], c["confidence"]) == ("commit_ahead_of_processing", "possible")


def test_records_at_or_after_the_commit_are_not_consumed_yet() -> None:
    c = consume_loss(runs(run(0, 60, 99)), {"loader": {0: 60, 1: 100}})
    assert (c["code"], c["confidence"]) == ("consumer_behind", "likely")
    never = consume_loss(runs(run(1, 0, 9)), {"loader": {0: 60, 1: NO_COMMIT}})
    assert never["code"] == "consumer_behind"
    # which of two groups feeds the sink is not known
    two = consume_loss(runs(run(0, 60, 99)), {"loader": {0: 60}, "audit": {0: 50}})
    assert (two["code"], two["confidence"]) == ("consumer_behind", "possible")


def test_a_whole_partition_missing_while_others_arrived_points_at_a_shared_group_id() -> None:
    c = consume_loss(runs(run(1, 0, 99)), {"loader": {0: 100, 1: 100}})
    assert (c["code"], c["confidence"]) == ("partition_not_consumed", "possible")
    assert any("flight recorder" in e for e in c["evidence"])


@pytest.mark.parametrize(("missing", "committed", "why_text"), [
    (runs(run(0, 20, 39)), {}, "consumer_groups"),
    (None, {"loader": {0: 60}}, "no offsets were found"),
    (runs(run(0, 50, 70)), {"loader": {0: 60}}, "both sides"),             # straddles
    ({**runs(run(0, 20, 39)), "runs": 80}, {"loader": {0: 60}}, "too scattered"),
])
def test_without_the_evidence_the_cause_is_unknown_and_says_what_was_missing(
        missing: dict[str, Any] | None, committed: dict[str, dict[int, int]],
        why_text: str) -> None:
    c = consume_loss(missing, committed)
    assert (c["code"], c["confidence"]) == ("unknown", "unknown")
    assert why_text in c["summary"] + " ".join(c["evidence"])


def test_sink_duplicates_in_a_batch_are_a_redelivery_after_a_crash() -> None:
    hop = {"duplicate_runs": runs(run(0, 40, 49))}
    c = classify(loss(kind="duplicate"), hop, ev())
    assert c is not None and (c["code"], c["confidence"]) == ("redelivery_after_crash",
                                                              "likely")
    single = classify(loss(kind="duplicate"), {"duplicate_runs": runs(run(0, 4, 4))}, ev())
    assert single is not None and single["confidence"] == "possible"


def test_a_batch_written_twice_into_parquet_files_is_a_replayed_micro_batch() -> None:
    hop = {"duplicate_runs": runs(run(0, 300, 449), run(1, 300, 449))}
    c = classify(loss(kind="duplicate"), hop, ev(tables={"warehouse": "parquet"}))
    assert c is not None and (c["code"], c["confidence"]) == ("replayed_micro_batch", "likely")
    assert "Parquet" in " ".join(c["evidence"])
    # a transactional table's duplicates are not a replayed batch: its writer commits once
    delta = classify(loss(kind="duplicate"), hop, ev(tables={"warehouse": "delta"}))
    assert delta is not None and delta["code"] == "redelivery_after_crash"


def test_a_loss_into_a_table_whose_streaming_writer_began_again_at_epoch_0_is_a_checkpoint_reset(
        ) -> None:
    from kafka_recon.runfiles.aggregates import StreamWriter

    def writer(q: str, first: int, last: int, at: str) -> StreamWriter:
        return StreamWriter(query_id=q, first_epoch=first, last_epoch=last, first_at=at,
                            last_at=at, commits=last - first + 1)
    restarted = [writer("a1", 0, 6, "2026-11-20T08:00:00Z"),
                 writer("b2", 0, 9, "2026-11-20T08:01:00Z")]
    hop = {"missing_runs": runs(run(0, 900, 1499), run(1, 900, 1499))}
    c = classify(loss(), hop, ev(writers={"warehouse": restarted}))
    assert c is not None and (c["code"], c["confidence"]) == ("checkpoint_reset", "likely")
    assert "query b2 began at epoch 0" in " ".join(c["evidence"])
    # one query resumed from its checkpoint (epochs go on): the usual consumer evidence applies
    resumed = [restarted[0], writer("a1", 7, 9, "2026-11-20T08:01:00Z")]
    other = classify(loss(), hop, ev(writers={"warehouse": resumed}))
    assert other is not None and other["code"] != "checkpoint_reset"


def test_records_from_nowhere_whose_ids_are_gaps_upstream_were_published_then_rolled_back(
        ) -> None:
    into = loss(hop=f"orders_db->{TOPIC}", side="write", kind="unexpected", count=100)
    hop = {"unexpected_runs": runs(run(0, 500, 549), run(1, 480, 529)), "unexpected_inside": 100}
    c = classify(into, hop, ev())
    assert c is not None and (c["code"], c["confidence"]) == ("published_then_rolled_back",
                                                              "likely")
    some = classify(into, {**hop, "unexpected_inside": 40}, ev())
    assert some is not None and (some["code"], some["confidence"]) == (
        "published_then_rolled_back", "possible")
    # ids beyond the upstream's range: nothing says the upstream ever had them
    none = classify(into, {**hop, "unexpected_inside": 0}, ev())
    assert none is not None and none["code"] == "written_by_someone_else"


def test_write_side_causes_from_the_audit_alone_are_never_likely() -> None:
    acks = [{"rule": "P1-acks", "observed": "acks=1"}]
    write = loss(hop=f"orders_db->{TOPIC}", side="write")
    c = classify(write, None, ev(audit=acks))
    assert c is not None and (c["code"], c["confidence"]) == ("unknown", "unknown")
    assert any("flight recorder" in e for e in c["evidence"])
    assert any("acks=1" in e for e in c["evidence"])
    dup = classify(loss(hop=f"orders_db->{TOPIC}", side="write", kind="duplicate"), None,
                   ev(audit=[{"rule": "P2-idempotence", "observed": "retries=3"}]))
    assert dup is not None and (dup["code"], dup["confidence"]) == (
        "retries_without_idempotence", "possible")


def test_unexpected_rows_were_possibly_written_by_someone_else() -> None:
    c = classify(loss(kind="unexpected", count=7), None, ev())
    assert c is not None and (c["code"], c["confidence"]) == ("written_by_someone_else",
                                                              "possible")


def test_late_and_other_kinds_carry_no_cause() -> None:
    assert classify(loss(kind="late"), None, ev()) is None


def test_the_report_says_the_cause_right_after_the_finding() -> None:
    c = consume_loss(runs(run(0, 20, 39)), {"loader": {0: 60, 1: 100}})
    text = why(Cause(**c))
    assert text.startswith(" Most likely because the consumer committed offsets before "
                           "writing the records")
    assert "partition 0, offsets 20-39" in text and "Fix: Commit offsets only after" in text
    unknown = consume_loss(None, {"loader": {0: 60}})
    assert why(Cause(**unknown)).startswith(" Cause unknown: the lost records could not be located")


# ------------------------------------------------------------------ write side, with the recorder
MADE = ("2026-11-20T10:00:00Z", "2026-11-20T10:00:05Z")
COVERED = {"snapshots": 40, "covered": True, "first": "2026-11-20T09:55:00Z",
           "last": "2026-11-20T10:20:00Z", "largest_gap_s": 60.0, "events": [], "members": {}}


def shape(*sizes: int) -> dict[str, Any]:
    runs_ = [{"first_id": str(i * 1000), "last_id": str(i * 1000 + n - 1), "records": n,
              "first_time": MADE[0], "last_time": MADE[1]} for i, n in enumerate(sizes)]
    return {"runs": len(sizes), "records": sum(sizes), "singles": sum(n == 1 for n in sizes),
            "first_time": MADE[0], "last_time": MADE[1], "largest": runs_}


def event(kind: str, at: str = "2026-11-20T10:00:02Z", until: str = "2026-11-20T10:00:03Z",
          **fields: Any) -> dict[str, Any]:
    return {"partition": 0, "event": kind, "between": [at, until], **fields}


def write_loss(missing: dict[str, Any] | None, events: list[dict[str, Any]],
               audit: list[dict[str, Any]] | None = None, **flight: Any) -> dict[str, Any]:
    c = classify(loss(hop=f"orders_db->{TOPIC}", side="write", count=10),
                 {"missing_shape": missing},
                 ev(audit=audit, flight={**COVERED, "events": events, **flight}))
    assert c is not None
    return c


SHRINK = event("isr_shrink", isr_before=[1, 2], isr_after=[2])
UNCLEAN = event("leader_change", **{"from": 2, "to": 1, "clean": False, "isr_before": [2],
                                    "epochs": [3, 4]})
CLEAN = {**UNCLEAN, "clean": True, "isr_before": [1, 2]}
OFFLINE = event("offline", leader_before=1, leader_after=1)


def test_a_loss_while_a_replica_outside_the_isr_was_elected_is_likely_truncation() -> None:
    c = write_loss(shape(400), [SHRINK, UNCLEAN])
    assert (c["code"], c["confidence"]) == ("lagging_replica_elected", "likely")
    assert any("not in the ISR [2]: an unclean election" in e for e in c["evidence"])
    assert any("ISR shrank from [1, 2] to [2]" in e for e in c["evidence"])
    back = write_loss(shape(400), [event("truncation", log_end_before=900, log_end_after=500)])
    assert (back["code"], back["confidence"]) == ("lagging_replica_elected", "likely")


def test_a_clean_leader_change_is_likely_only_with_the_producers_acks_declared() -> None:
    c = write_loss(shape(300), [CLEAN])
    assert (c["code"], c["confidence"]) == ("lagging_replica_elected", "possible")
    assert any("missing: the producer's acks" in e for e in c["evidence"])
    acks = write_loss(shape(300), [CLEAN], [{"rule": "P1-acks", "observed": "acks=0"}])
    assert acks["confidence"] == "likely"
    # min.insync.replicas=1 does not lose records to a clean election: still only possible
    isr = write_loss(shape(300), [CLEAN], [{"rule": "T2-min-isr",
                                           "observed": "min.insync.replicas=1"}])
    assert isr["confidence"] == "possible"


def test_a_loss_while_the_partition_had_no_leader_is_partition_offline() -> None:
    c = write_loss(shape(1500), [OFFLINE])
    assert (c["code"], c["confidence"]) == ("partition_offline", "likely")
    assert "partition 0 had no available leader between 2026-11-20T10:00:02Z" in \
        " ".join(c["evidence"])


def test_events_far_from_the_lost_records_times_are_not_theirs() -> None:
    c = write_loss(shape(300), [event("offline", at="2026-11-20T08:00:00Z",
                                      until="2026-11-20T08:01:00Z", leader_before=1,
                                      leader_after=1)])
    assert c["code"] == "unknown"


def test_isolated_single_records_on_a_quiet_cluster_were_rejected() -> None:
    c = write_loss(shape(1, 1, 1), [])
    assert (c["code"], c["confidence"]) == ("record_rejected", "likely")
    blind = write_loss(shape(1, 1, 1), [], covered=False)
    assert (blind["code"], blind["confidence"]) == ("record_rejected", "possible")
    assert any("did not cover" in e for e in blind["evidence"])


LATE = {"records": 3, "closed_at": "2026-11-21T00:10:00Z", "first": "2026-11-21T00:11:00Z",
        "last": "2026-11-21T00:12:30Z"}


def test_single_records_lost_into_a_topic_that_holds_them_after_grace_were_sent_late() -> None:
    # without the topic's records past the close, three singles on a quiet cluster read as
    # records the producer refused: the wrong cause for records that did arrive, late
    hop = {"missing_shape": shape(1, 1, 1), "missing_after_grace": LATE}
    c = classify(loss(hop=f"orders_db->{TOPIC}", side="write", count=3), hop,
                 ev(flight={**COVERED, "events": []}))
    assert c is not None and (c["code"], c["confidence"]) == ("arrived_after_grace", "likely")
    assert "the last 150 s after" in c["summary"]
    assert c["evidence"][0] == ("3 of the 3 lost record(s) are in the topic, with Kafka "
                                "timestamps 2026-11-21T00:11:00Z - 2026-11-21T00:12:30Z: after "
                                "its grace closed at 2026-11-21T00:10:00Z")
    assert "grace" in c["fix"]


def test_a_loss_only_partly_sent_late_keeps_the_rest_s_cause_and_says_so() -> None:
    hop = {"missing_shape": shape(1, 1, 1), "missing_after_grace": {**LATE, "records": 1}}
    c = classify(loss(hop=f"orders_db->{TOPIC}", side="write", count=3), hop,
                 ev(flight={**COVERED, "events": []}))
    assert c is not None and c["code"] == "record_rejected"
    assert c["evidence"][-1].startswith("1 of the 3 lost record(s) are in the topic")


def test_late_records_that_arrived_within_one_instant_give_their_time_once() -> None:
    one = {**LATE, "records": 2, "first": LATE["last"]}
    hop = {"missing_shape": shape(2), "missing_after_grace": one}
    c = classify(loss(hop=f"orders_db->{TOPIC}", side="write", count=2), hop,
                 ev(flight={**COVERED, "events": []}))
    assert c is not None and c["code"] == "arrived_after_grace"
    assert "with Kafka timestamp 2026-11-21T00:12:30Z: after" in c["evidence"][0], c["evidence"]


def test_lost_batches_on_a_quiet_cluster_have_no_known_cause() -> None:
    c = write_loss(shape(200, 1), [])
    assert (c["code"], c["confidence"]) == ("unknown", "unknown")
    assert "producer's own errors" in c["summary"]


def test_batches_written_twice_while_the_isr_shrank_are_retries_without_idempotence() -> None:
    dup = loss(hop=f"orders_db->{TOPIC}", side="write", kind="duplicate")
    copies = runs({**run(0, 100, 119), "first_ts": "2026-11-20T10:00:01Z",
                   "last_ts": "2026-11-20T10:00:04Z"},
                  {**run(0, 130, 149), "first_ts": "2026-11-20T10:00:04Z",
                   "last_ts": "2026-11-20T10:00:04Z"})
    c = classify(dup, {"duplicate_runs": copies}, ev(flight={**COVERED, "events": [SHRINK]}))
    assert c is not None and (c["code"], c["confidence"]) == (
        "retries_without_idempotence", "likely")
    quiet = classify(dup, {"duplicate_runs": copies}, ev(flight=COVERED))
    assert quiet is not None and (quiet["code"], quiet["confidence"]) == (
        "retries_without_idempotence", "possible")  # or the upstream sent them twice


def test_a_flume_loss_across_an_agent_restart_is_its_memory_channel() -> None:
    hop = loss(hop="collector.source->collector.sink", side="write", count=1000)
    c = classify(hop, None, ev(restarts={"collector.source": 1, "collector.sink": 1}))
    assert c is not None and (c["code"], c["confidence"]) == ("flume_channel_lost", "likely")
    steady = classify(hop, None, ev(restarts={"collector.source": 0, "collector.sink": 0}))
    assert steady is not None and steady["code"] == "unknown"


def member(mid: str, parts: list[int], client: str = "loader") -> dict[str, Any]:
    return {"member_id": mid, "client_id": client, "host": "/10.0.0.7", "partitions": parts,
            "first_seen": MADE[0], "last_seen": MADE[1]}


def test_members_holding_exactly_the_missing_partitions_make_a_shared_group_likely() -> None:
    missing = runs(run(1, 0, 99))
    flight = {**COVERED, "members": {"loader": [member("a-1", [0]), member("b-1", [1])]}}
    c = classify(loss(), {"missing_runs": missing},
                 ev({"loader": {0: 100, 1: 100}}, flight=flight))
    assert c is not None and (c["code"], c["confidence"]) == ("partition_not_consumed",
                                                              "likely")
    assert any("held partitions [1]" in e for e in c["evidence"])
    # one member holding every partition: nobody else consumed them
    alone = {**COVERED, "members": {"loader": [member("a-1", [0, 1])]}}
    c = classify(loss(), {"missing_runs": missing}, ev({"loader": {0: 100, 1: 100}},
                                                       flight=alone))
    assert c is not None and c["confidence"] == "possible"


def test_a_leader_bounce_between_snapshots_is_possibly_an_offline_spell() -> None:
    c = write_loss(shape(1500), [event("leader_bounced", leader=2, epochs=[0, 2])])
    assert (c["code"], c["confidence"]) == ("partition_offline", "possible")
    assert any("leader epoch went from 0 to 2" in e for e in c["evidence"])


def test_copies_under_their_originals_timestamp_are_the_client_resending_the_records() -> None:
    dup = loss(hop=f"orders_db->{TOPIC}", side="write", kind="duplicate")
    copies = runs(run(0, 100, 119), run(0, 130, 149))
    same = {"ids": 20, "same_timestamp": 20, "stamped_with_event_time": 0}
    c = classify(dup, {"duplicate_runs": copies, "duplicate_stamps": same}, ev(flight=COVERED))
    assert c is not None and (c["code"], c["confidence"]) == (
        "retries_without_idempotence", "likely")
    assert any("carries its original's timestamp" in e for e in c["evidence"])
    # a producer stamping records with their event time: equal stamps prove nothing
    stamped = {**same, "stamped_with_event_time": 20}
    c = classify(dup, {"duplicate_runs": copies, "duplicate_stamps": stamped},
                 ev(flight=COVERED))
    assert c is not None and c["confidence"] == "possible"
    # copies sent anew carry new timestamps
    anew = {**same, "same_timestamp": 0}
    c = classify(dup, {"duplicate_runs": copies, "duplicate_stamps": anew}, ev(flight=COVERED))
    assert c is not None and c["confidence"] == "possible"


def test_a_member_that_held_everything_before_the_other_joined_still_counts() -> None:
    # a joined first and held both partitions, then the rebalance gave b partition 1
    first = {**member("a-1", [0, 1]), "assignments": [[0, 1], [0]]}
    second = {**member("b-1", [1]), "assignments": [[1]]}
    flight = {**COVERED, "members": {"loader": [first, second]}}
    sink_b_lost_0 = classify(loss(), {"missing_runs": runs(run(0, 0, 99))},
                             ev({"loader": {0: 100, 1: 100}}, flight=flight))
    assert sink_b_lost_0 is not None and sink_b_lost_0["confidence"] == "likely"
    assert any("held partitions [0, 1] then [0]" in e for e in sink_b_lost_0["evidence"])


PAST = {"records": 3, "bound": "2026-11-21T00:15:00Z", "first": "2026-11-20T23:59:00Z",
        "last": "2026-11-20T23:59:00Z"}


def test_lost_records_found_past_the_offsets_replayed_were_written_after_the_close() -> None:
    # a transaction committed after the close, its records stamped with their event times,
    # written behind records stamped past the close plus the margin: the loss search's finds
    hop = {"missing_shape": shape(1, 1, 1), "missing_past_read": PAST}
    c = classify(loss(hop=f"orders_db->{TOPIC}", side="write", count=3), hop,
                 ev(flight={**COVERED, "events": []}))
    assert c is not None and (c["code"], c["confidence"]) == ("arrived_after_grace", "likely")
    assert "behind records stamped after it" in c["summary"]
    assert c["evidence"][0] == (
        "3 of the 3 lost record(s) are in the topic past the offsets replayed, which end at "
        "each partition's first record stamped at or after 2026-11-21T00:15:00Z (the close "
        "plus the disorder margin): they were written after it, though stamped with Kafka "
        "timestamp 2026-11-20T23:59:00Z")
    assert "commit interval" in c["fix"]


def test_lost_records_some_late_some_past_the_read_are_all_sent_late() -> None:
    hop = {"missing_shape": shape(1, 1, 1, 1, 1), "missing_after_grace": {**LATE, "records": 2},
           "missing_past_read": PAST}
    c = classify(loss(hop=f"orders_db->{TOPIC}", side="write", count=5), hop,
                 ev(flight={**COVERED, "events": []}))
    assert c is not None and c["code"] == "arrived_after_grace"
    assert "the last 150 s after" in c["summary"]
    assert [e.split(" are in")[0] for e in c["evidence"][:2]] == [
        "2 of the 5 lost record(s)", "3 of the 5 lost record(s)"]
