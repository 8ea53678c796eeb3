"""Causes read from a Kafka Connect connector's own evidence (its config, tasks and offsets,
as connectors.json keeps them), and the cause of records a sink dead-lettered."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_recon.result import causes
from kafka_recon.runfiles.aggregates import DeadLetterError, DeadLetters
from kafka_recon.runfiles.connectors import ConnectorSnapshot, TaskState
from tests.unit.result.test_causes import TOPIC, classify, ev, loss, run, runs

pytestmark = pytest.mark.unit

KAFKA_TOPIC = "shop.public.orders"


def sink(config: dict[str, str] | None = None, tasks: list[dict[str, Any]] | None = None,
         committed: dict[int, int] | None = None, **more: Any) -> ConnectorSnapshot:
    return ConnectorSnapshot(
        tier="warehouse", name="load", cluster="http://connect:8083", role="sink",
        state="RUNNING", config={"connector.class": "x.Sink", **(config or {})},
        tasks=[TaskState(**t) for t in (tasks or [{"id": 0, "state": "RUNNING"}])],
        offsets=[{"partition": {"kafka_topic": KAFKA_TOPIC, "kafka_partition": p},
                  "offset": {"kafka_offset": o}} for p, o in (committed or {}).items()],
        **more)


def cause_of(snap: ConnectorSnapshot, missing: dict[str, Any] | None,
             committed: dict[str, dict[int, int]] | None = None) -> dict[str, Any]:
    c = classify(loss(), {"missing_runs": missing},
                 ev(committed, connectors={"warehouse": snap}, topic_name=KAFKA_TOPIC))
    assert c is not None
    return c


def test_records_skipped_under_tolerance_all_without_a_queue_are_skipped_not_committed_ahead(
        ) -> None:
    # the connector read past them (its committed offset is beyond): Connect skipped them
    c = cause_of(sink({"errors.tolerance": "all", "errors.log.enable": "true"},
                      committed={0: 60}), runs(run(0, 12, 12), run(0, 28, 28)))
    assert (c["code"], c["confidence"]) == ("skipped_by_error_tolerance", "likely")
    assert any("below what it committed" in e for e in c["evidence"])
    assert any("errors.log.enable=true" in e for e in c["evidence"])


def test_a_failed_task_is_the_cause_of_the_records_after_where_it_stopped() -> None:
    trace = ("org.apache.kafka.connect.errors.ConnectException: Tolerance exceeded\n"
             "\tat org.apache.kafka.connect.runtime.WorkerSinkTask.deliverMessages\n")
    c = cause_of(sink(tasks=[{"id": 0, "state": "FAILED", "trace": trace}], committed={0: 12}),
                 runs(run(0, 12, 59)))
    assert (c["code"], c["confidence"]) == ("connector_task_failed", "likely")
    assert "task 0 FAILED: org.apache.kafka.connect.errors.ConnectException: Tolerance " \
           "exceeded" in c["evidence"]
    assert "the connector committed partition 0 at offset 12" in c["evidence"]


def test_a_connect_cluster_that_did_not_answer_makes_the_cause_unknown_naming_it() -> None:
    snap = sink(error="Kafka Connect at http://connect:8083 did not answer GET "
                      "/connectors/load/config: Connection refused")
    c = cause_of(snap, runs(run(0, 1, 5)))
    assert c["code"] == "unknown" and "could not be read" in c["summary"]
    assert "Connection refused" in c["evidence"][0]


def test_a_healthy_sink_is_judged_by_its_own_groups_commits() -> None:
    # no group declared in the flow: the connector's offsets stand for connect-<name>
    c = cause_of(sink(committed={0: 60}), runs(run(0, 10, 19)))
    assert c["code"] == "commit_ahead_of_processing"
    assert any("group 'connect-load'" in e for e in c["evidence"])


def test_the_sink_connector_rules_only_apply_to_the_hop_into_its_tier() -> None:
    c = classify(loss(hop=f"{TOPIC}->mart"), {"missing_runs": runs(run(0, 1, 5))},
                 ev({}, connectors={"warehouse": sink({"errors.tolerance": "all"})},
                    topic_name=KAFKA_TOPIC))
    assert c is not None and c["code"] == "unknown"


def test_dead_lettered_records_say_the_errors_their_headers_name() -> None:
    q = DeadLetters(topic="orders.dlq", connector="load", context_headers=True, errors=[
        DeadLetterError(error="org.postgresql.util.PSQLException", message="null value",
                        records=2),
        DeadLetterError(error="org.apache.kafka.connect.errors.DataException",
                        message="bad", records=1)])
    c = causes.dead_letter_cause(q, 3)
    assert (c.code, c.confidence) == ("dead_letter_queue", "likely")
    assert "(DataException, PSQLException)" in c.summary
    assert "2 record(s): org.postgresql.util.PSQLException: null value" in c.evidence


def test_without_context_headers_the_dead_letter_cause_says_what_is_missing() -> None:
    q = DeadLetters(topic="orders.dlq", connector="load", context_headers=False,
                    errors=[DeadLetterError(error=None, message=None, records=3)])
    c = causes.dead_letter_cause(q, 3)
    assert c.confidence == "possible" and "no error headers" in c.summary
    assert any("context.headers.enable=true" in e for e in c.evidence)


def _recorded(*events: dict[str, Any]) -> Any:
    from kafka_recon.runfiles.flight import ConnectorTimeline

    return ConnectorTimeline.model_validate({"name": "c", "snapshots": 9, "events": list(events)})


SPELL = ["2026-12-05T10:00:00Z", "2026-12-05T10:20:00Z"]


def test_topic_copies_after_a_source_lost_its_offsets_are_a_resnapshot() -> None:
    source = ConnectorSnapshot(tier=TOPIC, name="shop-cdc", cluster="http://c", role="source")
    c = classify(loss(hop=f"db->{TOPIC}", side="write", kind="duplicate"),
                 {"duplicate_runs": runs(run(0, 60, 119))},
                 ev({}, connectors={TOPIC: source},
                    connector_flight={TOPIC: _recorded({"event": "offsets_reset",
                                                         "between": SPELL})}))
    assert c is not None and (c["code"], c["confidence"]) == ("resnapshot", "likely")
    assert "connector 'shop-cdc''s offsets were deleted between 2026-12-05T10:00:00Z" in \
        c["evidence"][0]


def test_a_write_loss_inside_a_source_connectors_stopped_spell_is_resumed_past_changes(
        ) -> None:
    source = ConnectorSnapshot(tier=TOPIC, name="shop-cdc", cluster="http://c", role="source")
    shape = {"runs": 1, "records": 20, "singles": 0, "first_time": "2026-12-05T10:05:00Z",
             "last_time": "2026-12-05T10:06:00Z"}
    evidence = ev({}, connectors={TOPIC: source}, connector_flight={TOPIC: _recorded(
        {"event": "not_running", "state": "STOPPED", "between": SPELL})})
    c = classify(loss(hop=f"db->{TOPIC}", side="write"), {"missing_shape": shape}, evidence)
    assert c is not None
    assert (c["code"], c["confidence"]) == ("source_resumed_past_changes", "likely")
    # rows lost outside the spell: the spell is only possibly the cause
    later = {**shape, "first_time": "2026-12-05T11:00:00Z", "last_time": "2026-12-05T11:01:00Z"}
    c = classify(loss(hop=f"db->{TOPIC}", side="write"), {"missing_shape": later}, evidence)
    assert c is not None and c["confidence"] == "possible"


def test_a_sinks_offsets_moved_back_or_forward_explain_its_copies_and_its_loss() -> None:
    moved = {"warehouse": _recorded(
        {"event": "offsets_rewound", "between": SPELL, "partition": 0, "before": 90,
         "after": 30},
        {"event": "offsets_altered", "between": SPELL, "partition": 0, "before": 30,
         "after": 200})}
    e = ev({}, connectors={"warehouse": sink()}, connector_flight=moved,
           topic_name=KAFKA_TOPIC)
    dup = classify(loss(kind="duplicate"), {"duplicate_runs": runs(run(0, 30, 89))}, e)
    lost = classify(loss(), {"missing_runs": runs(run(0, 30, 199))}, e)
    assert dup is not None and dup["code"] == "sink_offsets_rewound"
    assert "moved back from 90 to 30" in dup["evidence"][0]
    assert lost is not None and lost["code"] == "sink_offsets_skipped"


def test_a_source_whose_slot_is_gone_fails_and_its_lost_rows_say_so() -> None:
    trace = ("io.debezium.DebeziumException: The connector is trying to read change stream "
             "starting at PostgresOffsetContext [...], but this is no longer available on the "
             "server. Reconfigure the connector to use a snapshot mode when needed.\n\tat x")
    source = ConnectorSnapshot(tier=TOPIC, name="shop-cdc", cluster="http://c", role="source",
                               state="RUNNING", tasks=[TaskState(id=0, state="FAILED",
                                                                 trace=trace)])
    e = ev({}, connectors={TOPIC: source}, connector_flight={TOPIC: _recorded(
        {"event": "not_running", "state": "STOPPED", "between": SPELL})})
    c = classify(loss(hop=f"db->{TOPIC}", side="write"), {}, e)
    assert c is not None and (c["code"], c["confidence"]) == ("source_position_lost", "likely")
    assert c["evidence"][0].startswith("task 0 FAILED: io.debezium.DebeziumException")
    assert "connector 'shop-cdc' was STOPPED between" in c["evidence"][1]
    # any other failure of the source is the failed task itself
    other = source.model_copy(update={"tasks": [TaskState(id=0, state="FAILED",
                                                          trace="java.io.IOException: x")]})
    c = classify(loss(hop=f"db->{TOPIC}", side="write"), {},
                 ev({}, connectors={TOPIC: other}))
    assert c is not None and c["code"] == "connector_task_failed"
