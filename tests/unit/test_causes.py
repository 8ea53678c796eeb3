"""Each cause recogniser on small crafted evidence, with the ambiguous cases that must say
`possible` or `unknown`, never `likely`."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_recon.outputs.report import why
from kafka_recon.result.causes import classify
from kafka_recon.result.model import Cause
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
    c = classify(loss(), {"missing_runs": missing}, TOPIC, committed,
                 SPANS if spans is None else spans, audit or [])
    assert c is not None
    return c


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
    c = classify(loss(kind="duplicate"), hop, TOPIC, {}, SPANS, [])
    assert c is not None and (c["code"], c["confidence"]) == ("redelivery_after_crash",
                                                              "likely")
    single = classify(loss(kind="duplicate"), {"duplicate_runs": runs(run(0, 4, 4))}, TOPIC,
                      {}, SPANS, [])
    assert single is not None and single["confidence"] == "possible"


def test_write_side_causes_from_the_audit_alone_are_never_likely() -> None:
    acks = [{"rule": "P1-acks", "observed": "acks=1"}]
    c = classify(loss(hop=f"orders_db->{TOPIC}", side="write"), None, TOPIC, {}, SPANS, acks)
    assert c is not None and (c["code"], c["confidence"]) == ("lagging_replica_elected",
                                                              "possible")
    bare = classify(loss(hop=f"orders_db->{TOPIC}", side="write"), None, TOPIC, {}, SPANS, [])
    assert bare is not None and (bare["code"], bare["confidence"]) == ("unknown", "unknown")
    dup = classify(loss(hop=f"orders_db->{TOPIC}", side="write", kind="duplicate"), None,
                   TOPIC, {}, SPANS, [{"rule": "P2-idempotence", "observed": "retries=3"}])
    assert dup is not None and dup["code"] == "retries_without_idempotence"


def test_unexpected_rows_were_possibly_written_by_someone_else() -> None:
    c = classify(loss(kind="unexpected", count=7), None, TOPIC, {}, SPANS, [])
    assert c is not None and (c["code"], c["confidence"]) == ("written_by_someone_else",
                                                              "possible")


def test_late_and_other_kinds_carry_no_cause() -> None:
    assert classify(loss(kind="late"), None, TOPIC, {}, SPANS, []) is None


def test_the_report_says_the_cause_right_after_the_finding() -> None:
    c = consume_loss(runs(run(0, 20, 39)), {"loader": {0: 60, 1: 100}})
    text = why(Cause(**c))
    assert text.startswith(" Most likely because the consumer committed offsets before "
                           "writing the records")
    assert "partition 0, offsets 20-39" in text and "Fix: Commit offsets only after" in text
    unknown = consume_loss(None, {"loader": {0: 60}})
    assert why(Cause(**unknown)).startswith(" Cause unknown: the lost records could not be located")
