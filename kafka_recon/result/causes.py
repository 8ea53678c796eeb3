"""Why: a probable cause for each loss, duplicate and unexpected finding, from evidence the
cluster already holds (no client is touched).

Each cause has a code, a summary, a confidence and the evidence it rests on:

- `likely`: the run's own measurements show the mechanism (where the records sit in the topic
  against what the production group committed);
- `possible`: the evidence fits but does not single the mechanism out (one of several groups,
  scattered singles, or the audit's configuration rules alone, which corroborate but are never
  the only ground for `likely`);
- `unknown`: says which evidence was missing.

This module is pure: the reconcile step's aggregates, the replay's committed offsets, the
flight recorder's timeline and the audit's rows in, causes out.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Literal

from kafka_recon.result.model import Cause, Finding
from kafka_recon.runfiles.aggregates import (
    AfterGrace,
    CounterGap,
    DeadLetters,
    HopTally,
    OffsetRun,
    OutsideRead,
    PartitionSpan,
    Runs,
    Shape,
    Stamps,
    StreamWriter,
)
from kafka_recon.runfiles.audit import Risk
from kafka_recon.runfiles.connectors import ConnectorSnapshot
from kafka_recon.runfiles.flight import (
    ConnectorEvent,
    ConnectorTimeline,
    Member,
    PartitionEvent,
    Timeline,
)
from kafka_recon.sources.topic import NO_COMMIT
from kafka_recon.window import parse_instant

Confidence = Literal["likely", "possible", "unknown"]

# how far from the lost records' own event times a recorded event may lie and still be taken
# for theirs: records are made, then sent, seconds to minutes later, and the recorder sees the
# cluster only every few minutes
SLACK = timedelta(minutes=10)


@dataclass(frozen=True)
class Evidence:
    """Everything a cause is read from, for one run."""

    topic: str                                       # the topic tier this evidence is about
    committed: dict[str, dict[int, int]] = field(default_factory=dict)
    spans: dict[str, PartitionSpan] = field(default_factory=dict)  # window records by partition
    audit: list[Risk] = field(default_factory=list)
    flight: Timeline = field(default_factory=Timeline)              # the flight recorder's
    restarts: dict[str, int] = field(default_factory=dict)          # Flume point -> restarts
    tables: dict[str, str] = field(default_factory=dict)            # table tier -> its format
    writers: dict[str, list[StreamWriter]] = field(default_factory=dict)  # a table's queries
    connectors: dict[str, ConnectorSnapshot] = field(default_factory=dict)  # by tier
    # the flight recorder's snapshots of each connector, by tier
    connector_flight: dict[str, ConnectorTimeline] = field(default_factory=dict)
    topic_name: str = ""                             # the topic tier's Kafka topic


@dataclass(frozen=True)
class Known:
    seed: str
    fix: str


CAUSES: dict[str, Known] = {
    "commit_ahead_of_processing": Known(
        "000,001", "Commit offsets only after the sink has written the records: disable "
                   "enable.auto.commit and commit after the write."),
    "consumer_behind": Known(
        "004", "Let the consumer catch up (or add consumers), then reconcile the window again."),
    "partition_not_consumed": Known(
        "004", "Give each application its own group.id, and check the group's members and "
               "their assigned partitions."),
    "redelivery_after_crash": Known(
        "000,003", "Make the sink's write idempotent (upsert by id), or commit the offsets in "
                   "the same transaction as the write."),
    "checkpoint_reset": Known(
        "004", "Never delete a streaming job's checkpoint to restart it; when it is lost, start "
               "the new query from the offsets the table last committed (startingOffsets as "
               "JSON), not `latest`, then reconcile the window again."),
    "replayed_micro_batch": Known(
        "000,003", "Write the stream into a transactional table (Delta, Iceberg: their "
                   "streaming writers commit a batch once), or make foreachBatch idempotent "
                   "(overwrite what the batch id wrote, or upsert by id)."),
    "published_then_rolled_back": Known(
        "004", "Publish a row only once its transaction has committed: an outbox table read "
               "by a change-data-capture connector, or send after COMMIT (never inside the "
               "transaction)."),
    "written_by_someone_else": Known(
        "004", "Find the sink's other writers (load jobs, back-fills, manual fixes) and keep "
               "them off the flow's table, or give them their own ids."),
    "retention_deleted_unread": Known(
        "003,004", "Raise the topic's retention.ms above the consumer's worst lag, or catch the "
                   "consumer up before retention runs."),
    "lagging_replica_elected": Known(
        "000-004", "Produce with acks=all, keep min.insync.replicas=2 and "
                   "unclean.leader.election.enable=false."),
    "retries_without_idempotence": Known(
        "000,003", "Set enable.idempotence=true on the producer."),
    "partition_offline": Known(
        "000,001", "Produce with acks=all, a delivery callback that acts on failures and a "
                   "delivery.timeout.ms longer than a broker's restart; keep replication.factor "
                   ">= 3 so a partition keeps a leader."),
    "record_rejected": Known(
        "000,004", "Check the producer's delivery reports for these records: align "
                   "max.request.size, the topic's max.message.bytes and the broker's "
                   "message.max.bytes with the largest record, and fix records that cannot be "
                   "serialized."),
    "flume_channel_lost": Known(
        "004", "Use a file channel (or Kafka channel) for the agent instead of a memory "
               "channel, so events accepted survive a restart."),
    "resent_after_restart": Known(
        "004", "Expect copies after a mirror or processor restarts (at-least-once), and set "
               "the hop's tolerance.duplicate, or make the processor transactional "
               "(exactly-once) and read the target topic read_committed."),
    "skipped_between_topics": Known(
        "000,004", "Keep the source topic's retention.ms above the mirror's or processor's "
                   "worst lag; a processor must produce its output before it commits its "
                   "input (or use transactions)."),
    "dead_letter_queue": Known(
        "004", "Fix what the error names (the records' content, the sink table's constraints "
               "or types), then re-deliver the dead-lettered records (kafka-recon repair, or "
               "the queue re-processed into the sink)."),
    "skipped_by_error_tolerance": Known(
        "004", "Give the sink connector a dead-letter queue "
               "(errors.deadletterqueue.topic.name, with context headers), or set "
               "errors.tolerance=none so it stops on a record it cannot write; then "
               "re-deliver the lost records."),
    "connector_task_failed": Known(
        "004", "Fix what the task's trace names, then restart the task (POST "
               "/connectors/<name>/tasks/<id>/restart): it resumes at its committed offset, "
               "and the window's records arrive late, not lost; reconcile the window again."),
    "resnapshot": Known(
        "004", "Keep the Connect cluster's offsets (never delete a source connector's offsets, "
               "protect its offset topic); make the sink idempotent (upsert by id) so that "
               "a snapshot read again changes nothing; remove the window's extra copies."),
    "source_resumed_past_changes": Known(
        "004", "Never drop a change-data-capture connector's replication slot while it is "
               "stopped, and bound how long it may stay stopped (max_slot_wal_keep_size); "
               "after a gap, run an incremental snapshot of the window's rows (Debezium's "
               "signal table) and reconcile the window again."),
    "source_position_lost": Known(
        "004", "Restart the source from a new snapshot of what it missed: Debezium's "
               "snapshot.mode=when_needed for one start, or an incremental snapshot of the "
               "window's rows (its signal table); never drop a stopped connector's replication "
               "slot, and bound the WAL it may hold back (max_slot_wal_keep_size) with an "
               "alert before it is removed."),
    "sink_offsets_rewound": Known(
        "004", "Rewind a sink connector's offsets only with an idempotent sink (upsert by id), "
               "or delete what it loaded past the new offsets first; remove the window's extra "
               "copies."),
    "sink_offsets_skipped": Known(
        "004", "Move a sink connector's offsets forward only for records loaded some other "
               "way; re-deliver the window's lost records (kafka-recon repair)."),
    "arrived_after_grace": Known(
        "004", "Raise the flow's grace (or the topic tier's own) above the producer's longest "
               "delay, or find why it sent these records late (a backlog, a retry queue, a "
               "job publishing after the fact, a transactional producer committing less often "
               "than the grace: its checkpoint or commit interval). They are in the topic, so "
               "its consumers read them: look for them in the sink before re-delivering any."),
    "unknown": Known("004", "Confirm the loss (re-run the window), find its hop in the "
                            "report, then check that hop's clients and the brokers' logs for "
                            "the window."),
}


def cause(code: str, summary: str, confidence: Confidence, evidence: list[str]) -> Cause:
    known = CAUSES[code]
    return Cause(code=code, summary=summary, confidence=confidence, evidence=evidence,
                 seed=known.seed, fix=known.fix)


def _run_text(r: OffsetRun) -> str:
    span = f"offsets {r.first_offset}-{r.last_offset}" \
        if r.first_offset != r.last_offset else f"offset {r.first_offset}"
    return f"partition {r.partition}, {span} ({r.records} record(s))"


def _runs_text(runs: Runs, shown: int = 3) -> str:
    largest = runs.largest[:shown]
    more = runs.runs - len(largest)
    return "; ".join(_run_text(r) for r in largest) + (f"; and {more} more run(s)"
                                                      if more > 0 else "")


def _batched(runs: Runs) -> bool:
    """Contiguous batches (as a consumer fetches and commits), not scattered single records."""
    return runs.records >= 2 * runs.runs


def _relation(runs: Runs, committed: dict[int, int]) -> str:
    """`below` when every run ends before the group's committed offset on its partition,
    `above` when every run starts at or after it (or the group never committed there), else
    `mixed`."""
    rel = set()
    for r in runs.largest:
        c = committed.get(r.partition, NO_COMMIT)
        if c != NO_COMMIT and r.last_offset < c:
            rel.add("below")
        elif c == NO_COMMIT or r.first_offset >= c:
            rel.add("above")
        else:
            rel.add("mixed")
    return rel.pop() if len(rel) == 1 else "mixed"


def _audit_says(audit: list[Risk], *rules: str) -> list[str]:
    return [f"the audit found {a.observed} (rule {a.rule})" for a in audit if a.rule in rules]


def _members_text(members: list[Member]) -> str:
    def holding(m: Member) -> str:
        return " then ".join(str(a) for a in m.assignments or [m.partitions])
    return "; ".join(f"client '{m.client_id}' on {m.host} (member {m.member_id[:24]}) "
                     f"held partitions {holding(m)}" for m in members)


def _shared_group(g: str, whole: list[str], flight: Timeline) -> list[str] | None:
    """The recorder's proof that members of the group other than the sink's own held exactly
    the partitions the sink lacks: their description, or None when it does not show that."""
    members = flight.members.get(g) or []
    lost = {int(p) for p in whole}

    def held(m: Member) -> list[set[int]]:
        return [set(a) for a in m.assignments or [m.partitions]]
    # at some point one member held only lost partitions, and another held ones that arrived
    holders = [m for m in members if any(a and a <= lost for a in held(m))]
    others = [m for m in members if any(a - lost for a in held(m))]
    if not holders or not others:
        return None
    return [f"group '{g}' had {len(members)} member(s) over the window: "
            f"{_members_text(members)}",
            f"the member(s) holding partitions {sorted(lost)} wrote elsewhere: none of those "
            "partitions' records reached this sink"]


def consume_loss(runs: Runs | None, ev: Evidence) -> Cause:
    """A consume-side loss, from where its records sit against the groups' commits."""
    committed, spans, audit = ev.committed, ev.spans, ev.audit
    if not runs:
        return cause("unknown", "the lost records could not be located in the topic",
                     "unknown", ["no offsets were found for the missing ids"])
    where = _runs_text(runs)
    if not committed:
        return cause("unknown", "no production consumer group is declared for the topic, so "
                     "the loss cannot be compared with what the consumer committed", "unknown",
                     [f"the lost records sit at {where}",
                      "missing: the flow's consumer_groups (committed offsets)"])
    if len(runs.largest) < runs.runs:
        return cause("unknown", f"the lost records are spread over {runs.runs} runs of "
                     "offsets, too scattered to compare each with the groups' commits",
                     "unknown", [f"the largest runs: {where}"])
    relations = {g: _relation(runs, offs) for g, offs in committed.items()}
    below = [g for g, r in relations.items() if r == "below"]
    above = [g for g, r in relations.items() if r == "above"]
    one = len(committed) == 1
    if below:
        g = below[0]
        whole = [p for p, span in spans.items() if any(
            r.partition == int(p) and r.records == span.records for r in runs.largest)]
        others_whole = runs.partitions == len(whole) and len(spans) > len(whole)
        evidence = [f"the lost records sit at {where}",
                    f"all of them below the offsets group '{g}' committed"]
        if others_whole:
            shared = _shared_group(g, whole, ev.flight)
            return cause("partition_not_consumed",
                         f"whole partitions ({', '.join(whole)}) never reached the sink while "
                         f"group '{g}' committed past them and the other partitions arrived "
                         "whole: another application sharing the group id consumed them"
                         + ("" if shared else " (possibly)"),
                         "likely" if shared else "possible", evidence + (shared or [
                             "missing: the group's members over the window (the flight "
                             "recorder)"]))
        corroboration = _audit_says(audit, "C1-auto-commit")
        confident = one and _batched(runs)
        return cause("commit_ahead_of_processing",
                     f"the consumer committed offsets before writing the records: group "
                     f"'{g}' moved past them and they never reached the sink",
                     "likely" if confident else "possible",
                     evidence + corroboration + ([] if one else [
                         f"{len(committed)} groups are declared: which feeds this sink is not "
                         "known"]) + ([] if _batched(runs) else [
                             "the records are scattered singles, not fetched batches: the sink "
                             "may also have rejected them one by one"]))
    if above and len(above) == len(committed):
        return cause("consumer_behind",
                     "the consumer has not yet consumed these records: its committed offsets "
                     "are at or before them", "likely" if one else "possible",
                     [f"the lost records sit at {where}",
                      f"at or after the offsets {', '.join(repr(g) for g in above)} committed"])
    return cause("unknown", "the lost records lie on both sides of what the groups committed",
                 "unknown", [f"the lost records sit at {where}",
                             f"relation to each group's commits: {relations}"])


def consume_duplicate(runs: Runs | None, table: str | None = None) -> Cause:
    """A consume-side duplicate; `table`: the sink's format when it is a table tier."""
    if not runs:
        return cause("unknown", "the duplicated records could not be located in the topic",
                     "unknown", ["no offsets were found for the duplicated ids"])
    evidence = [f"the records written twice sit at {_runs_text(runs)}"]
    if table == "parquet" and _batched(runs):
        return cause("replayed_micro_batch",
                     "a streaming job's micro-batch was written twice: the job wrote its files "
                     "and stopped before its checkpoint committed the batch, and its restart "
                     "ran the same offsets again into files that keep both copies", "likely",
                     evidence + ["the sink is Parquet files: an append has no transaction "
                                 "that a replayed batch could find already committed"])
    if _batched(runs):
        return cause("redelivery_after_crash",
                     "a batch was delivered again: the consumer wrote it and stopped before "
                     "committing, and its successor read it again from the last commit",
                     "likely", evidence)
    return cause("redelivery_after_crash", "records were delivered again, one by one",
                 "possible", evidence + ["the copies are scattered singles, not a batch: the "
                                         "sink's own retries may have written them twice"])


def _restarted(writers: list[StreamWriter]) -> tuple[StreamWriter, StreamWriter] | None:
    """The query a table's writer ran before it lost its checkpoint, and the new one that
    began again at epoch 0 (the history's order), when the history shows one."""
    for before, after in zip(writers, writers[1:], strict=False):
        if after.first_epoch == 0 and after.query_id != before.query_id:
            return before, after
    return None


def checkpoint_reset(runs: Runs | None, restart: tuple[StreamWriter, StreamWriter]) -> Cause:
    """A consume-side loss into a table whose streaming writer started over."""
    before, after = restart
    evidence = [f"the table's history: streaming query {before.query_id} committed epochs "
                f"{before.first_epoch}-{before.last_epoch} until {before.last_at}; query "
                f"{after.query_id} began at epoch 0 at {after.first_at} (a new checkpoint)"]
    if runs:
        evidence.append(f"the lost records sit at {_runs_text(runs)}")
    likely = runs is not None and _batched(runs) and len(runs.largest) == runs.runs
    return cause("checkpoint_reset",
                 "the streaming job writing the table started over without its checkpoint, "
                 "from offsets past records it had not processed: they were never read",
                 "likely" if likely else "possible",
                 evidence + ([] if likely else ["the lost records are not contiguous runs: "
                                                "something else may have lost some"]))


def rolled_back(finding: Finding, hop: HopTally) -> Cause:
    """Records in the topic that the upstream does not hold, whose ids are gaps in its own
    sequence: rows the producer sent inside a transaction that then rolled back."""
    inside = hop.unexpected_inside or 0
    evidence = [f"{inside} of the {finding.count} id(s) lie between the upstream's lowest and "
                "highest id: gaps in its own sequence, as a rolled-back transaction leaves"]
    runs = hop.unexpected_runs
    if runs:
        evidence.append(f"they sit in the topic at {_runs_text(runs)}")
    likely = inside == finding.count and runs is not None and _batched(runs)
    return cause("published_then_rolled_back",
                 "the producer published rows that its database never committed: the "
                 "transaction that wrote them rolled back after they were sent",
                 "likely" if likely else "possible",
                 evidence + ([] if likely else ["not every id is a gap, or they are scattered: "
                                                "another writer may have sent some"]))


def between_topics(kind: str, side: str, name: str, hop: HopTally | None) -> Cause:
    """A loss or duplicate between two topics of the flow: a mirror (`replication`) or a
    processor (`process`) that skipped records of its source or wrote some twice."""
    who = "the mirror" if side == "replication" else "the processor"
    if kind == "duplicate":
        runs = hop.duplicate_runs if hop else None
        if not runs:
            return cause("unknown", "the duplicated records could not be located in the "
                         "target topic", "unknown", ["no offsets were found for the ids"])
        evidence = [f"the copies sit in the target topic at {_runs_text(runs)}"]
        if _batched(runs):
            return cause("resent_after_restart",
                         f"{who} wrote a run of records again: it restarted from offsets "
                         "committed behind what it had already produced (at-least-once)",
                         "likely", evidence)
        return cause("resent_after_restart", f"{who} wrote records again, one by one",
                     "possible", evidence + ["the copies are scattered singles, not a run: "
                                             "its producer's retries may have written them"])
    runs = hop.missing_runs if hop else None
    if not runs:
        return cause("unknown", f"the records lost between the topics of {name} could not be "
                     "located in the source topic", "unknown",
                     ["no offsets were found for the missing ids"])
    evidence = [f"the lost records sit in the source topic at {_runs_text(runs)}"]
    if _batched(runs):
        why = ("it was behind when retention deleted them from the source, or was not running"
               if side == "replication" else
               "it committed its input before producing its output and stopped in between, "
               "or was behind when retention deleted them")
        return cause("skipped_between_topics",
                     f"{who} skipped runs of its source topic's records: {why}",
                     "possible", evidence)
    return cause("unknown", f"single records of the source topic never reached the target: "
                 f"{who} may have dropped them (a filter, or records it could not write)",
                 "unknown", evidence)


# ------------------------------------------------------------------ the write side
def _parse(t: str | None) -> datetime | None:
    return parse_instant(t, "a recorded time") if t else None


def _overlapping(flight: Timeline, lo: datetime | None, hi: datetime | None
                 ) -> list[PartitionEvent]:
    """The recorder's events that may have happened while records made from lo to hi were
    sent (SLACK either side); all of them when the records' times are unknown."""
    if lo is None or hi is None:
        return list(flight.events)
    a, b = lo - SLACK, hi + SLACK
    return [e for e in flight.events
            if parse_instant(e.between[0], "an event") <= b
            and parse_instant(e.between[1], "an event") >= a]


def _event_text(e: PartitionEvent) -> str:
    when = f"between {e.between[0]} and {e.between[1]}"
    p = f"partition {e.partition}"
    if e.event == "leader_change":
        how = "a replica in the ISR" if e.clean else \
            f"not in the ISR {e.isr_before}: an unclean election"
        return f"{p}: leader moved from broker {e.from_} to broker {e.to} ({how}) {when}"
    if e.event == "offline":
        return f"{p} had no available leader {when}"
    if e.event == "isr_shrink":
        return f"{p}: ISR shrank from {e.isr_before} to {e.isr_after} {when}"
    if e.event == "leader_bounced":
        epochs = e.epochs or [None, None]
        return (f"{p}: leader epoch went from {epochs[0]} to {epochs[1]} {when} while "
                f"its leader stayed broker {e.leader}: it lost leadership and won it back "
                "between the snapshots")
    if e.event == "truncation":
        return (f"{p}: the high watermark went back from {e.log_end_before} to "
                f"{e.log_end_after} {when}: acknowledged records were truncated")
    return f"{p}: {e.event} {when}"


def _shape_text(shape: Shape) -> str:
    big = shape.largest[0] if shape.largest else None
    text = (f"{shape.records} record(s) in {shape.runs} run(s) of the upstream's order "
            f"(event time, then id), {shape.singles} of them single records")
    if big:
        text += (f"; the largest, ids {big.first_id}-{big.last_id} ({big.records}), "
                 f"made {big.first_time} - {big.last_time}")
    return text


def _recorder_gap(flight: Timeline) -> str | None:
    """Why the recorder cannot vouch for the window, or None when it covered it."""
    if not flight.snapshots:
        return ("missing: the flight recorder's snapshots of the topic over the window (run "
                "`kafka-recon snapshot` on a schedule)")
    if not flight.covered:
        return (f"the flight recorder did not cover the whole window ({flight.snapshots} "
                f"snapshot(s), {flight.first} - {flight.last}, largest gap "
                f"{flight.largest_gap_s} s)")
    return None


def write_loss(shape: Shape | None, ev: Evidence) -> Cause:
    """A loss between the upstream and the topic, from the recorder's events while the records
    were sent and the lost records' shape."""
    flight = ev.flight
    evidence = [f"the lost records: {_shape_text(shape)}"] if shape else []
    near = _overlapping(flight, _parse(shape.first_time if shape else None),
                        _parse(shape.last_time if shape else None))
    gap = _recorder_gap(flight)
    acks = _audit_says(ev.audit, "P1-acks", "T4-unclean-election", "T2-min-isr")
    truncated = [e for e in near if e.event == "truncation"
                 or e.event == "leader_change" and not e.clean]
    moved = [e for e in near if e.event == "leader_change"]
    shrunk = [e for e in near if e.event == "isr_shrink"]
    offline = [e for e in near if e.event == "offline"]
    bounced = [e for e in near if e.event == "leader_bounced"]
    if truncated:
        return cause("lagging_replica_elected",
                     "a replica that lacked acknowledged records became leader and the log "
                     "was truncated to it while these records were sent", "likely",
                     evidence + [_event_text(e) for e in shrunk + truncated] + acks)
    if moved:
        # a new leader from the ISR lacks only what the ISR was not waited for: records sent
        # with acks below all (min.insync.replicas does not matter to a clean election)
        below_all = _audit_says(ev.audit, "P1-acks")
        undeclared = [] if below_all else [
            "missing: the producer's acks (declare the flow's producer settings): a clean "
            "election loses nothing a producer with acks=all was told was written"]
        return cause("lagging_replica_elected",
                     "the partition's leader changed while these records were sent: records "
                     "only the old leader held (acknowledged with acks below all, or not "
                     "acknowledged at all) were lost with it",
                     "likely" if below_all else "possible",
                     evidence + [_event_text(e) for e in shrunk + moved] + acks + undeclared)
    if offline:
        return cause("partition_offline",
                     "the partition had no leader while these records were sent: the producer "
                     "dropped them (fire-and-forget, or delivery.timeout.ms expired) instead "
                     "of waiting for it", "likely",
                     evidence + [_event_text(e) for e in offline] + acks)
    if bounced:
        return cause("partition_offline",
                     "the partition's leader lost and won back leadership while these records "
                     "were sent, most likely offline in between: the producer dropped what it "
                     "could not deliver", "possible",
                     evidence + [_event_text(e) for e in bounced] + acks + [
                         "no snapshot fell inside the spell: the recorder's interval is longer "
                         "than it"])
    if shape and shape.runs and shape.singles == shape.runs:
        sizes = _audit_says(ev.audit, "S1-size-chain")
        return cause("record_rejected",
                     "single records were refused one by one (too large for the topic or "
                     "the producer, or not serializable) while the records around them "
                     "arrived", "possible" if gap else "likely",
                     evidence + (["the recorder saw no leader change, offline partition or "
                                  "truncation over the window"] if not gap else [gap]) + sizes)
    if gap:
        return cause("unknown", "nothing recorded over the window points at a mechanism for "
                     "this write-side loss", "unknown", evidence + [gap] + acks)
    return cause("unknown", "the lost records form batches, but the recorder saw no leader "
                 "change, offline partition or truncation while they were sent: look at the "
                 "producer's own errors (delivery timeouts, a crash with unsent batches)",
                 "unknown", evidence + [_event_text(e) for e in near] + acks)


def _same_record_sent_twice(stamps: Stamps | None) -> str | None:
    """Evidence that each copy is the original record sent again by the client: every copy
    of every id under its original's timestamp, from a producer that does not stamp records
    with their event time."""
    if not stamps or not stamps.ids:
        return None
    if stamps.same_timestamp == stamps.ids and not stamps.stamped_with_event_time:
        return (f"every copy of each of the {stamps.ids} id(s) carries its original's "
                "timestamp to the millisecond: the producer sent the same records again (a "
                "client retry keeps the CreateTime; records sent anew get a new one)")
    return None


def write_duplicate(runs: Runs | None, ev: Evidence, stamps: Stamps | None = None) -> Cause:
    """Copies in the topic of records the upstream made once."""
    p2 = _audit_says(ev.audit, "P2-idempotence")
    if not runs:
        return cause("retries_without_idempotence" if p2 else "unknown",
                     "the duplicated records could not be located in the topic",
                     "possible" if p2 else "unknown",
                     p2 + ["no offsets were found for the duplicated ids"])
    evidence = [f"the copies sit at {_runs_text(runs)}"]
    lo = _parse(min((r.first_ts for r in runs.largest if r.first_ts), default=None))
    hi = _parse(max((r.last_ts for r in runs.largest if r.last_ts), default=None))
    slow = [e for e in _overlapping(ev.flight, lo, hi)
            if e.event in ("isr_shrink", "leader_change", "offline")]
    resent = _same_record_sent_twice(stamps)
    if _batched(runs) and (slow or p2 or resent):
        return cause("retries_without_idempotence",
                     "the producer sent whole batches again after their requests timed out, "
                     "and without idempotence the broker wrote both copies", "likely",
                     evidence + ([resent] if resent else []) +
                     [_event_text(e) + ": produce requests waited on it" for e in slow] + p2)
    gap = _recorder_gap(ev.flight)
    return cause("retries_without_idempotence",
                 "batches written twice: a producer retry without idempotence, or the "
                 "upstream sending the records again", "possible",
                 evidence + p2
                 + ([] if _batched(runs) else ["the copies are scattered singles, not batches"])
                 + ([gap] if gap else []))


def flume_loss(hop: str, ev: Evidence, gap: CounterGap | None = None) -> Cause:
    """A loss inside a Flume agent: accepted by its source, never drained by its sink."""
    source = hop.split("->")[0]
    agent = source.rsplit(".", 1)[0]
    restarts = ev.restarts.get(source, 0) + ev.restarts.get(hop.split("->")[-1], 0)
    uncounted = [f"the agent's counters said {gap.counted} event(s) never drained, but the "
                 f"id tiers around it show {gap.lost} lost: "
                 + ", ".join(f"{n} reached {h.split('->')[-1]} without being counted drained"
                             for h, n in gap.passed_on_uncounted.items())
                 + " (a batch delivered as the process died)"] if gap else []
    if restarts:
        return cause("flume_channel_lost",
                     f"agent '{agent}' restarted inside the window with events accepted but "
                     "not yet drained: its memory channel was lost with the process", "likely",
                     [f"the agent's StartTime changed between snapshots ({restarts} restart(s) "
                      "seen by the counters) and its counters began again from zero"]
                     + uncounted)
    return cause("unknown", f"agent '{agent}' accepted events it never drained, without a "
                 "restart: a full channel or a sink stuck on the topic may still hold them",
                 "unknown", ["no restart of the agent inside the window",
                             "missing: the agent's ChannelSize at the window's end"])


def dead_letter_cause(q: DeadLetters, records: int) -> Cause:
    """Why records were dead-lettered: the errors their context headers name."""
    errors = [f"{e.records} record(s): {e.error or 'an unnamed error'}"
              + (f": {e.message}" if e.message else "") for e in q.errors[:5]]
    if not q.context_headers or not q.errors or all(e.error is None for e in q.errors):
        return cause("dead_letter_queue",
                     f"sink connector '{q.connector}' routed {records} record(s) to its "
                     f"dead-letter queue '{q.topic}'; the records carry no error headers, so "
                     "why is not known", "possible",
                     [f"{records} missing id(s) found in '{q.topic}'",
                      "missing: errors.deadletterqueue.context.headers.enable=true (the error, "
                      "original topic, partition and offset of each record)"])
    kinds = sorted({(e.error or "").rsplit(".", 1)[-1] for e in q.errors})
    return cause("dead_letter_queue",
                 f"sink connector '{q.connector}' could not write them and routed them to its "
                 f"dead-letter queue '{q.topic}' ({', '.join(kinds)})", "likely",
                 [f"{records} missing id(s) found in '{q.topic}'"] + errors
                 + ([f"and {len(q.errors) - 5} more error(s)"] if len(q.errors) > 5 else []))


def unreadable_dead_letters(q: DeadLetters) -> Cause:
    return cause("dead_letter_queue",
                 f"{q.unidentifiable} record(s) of the window in dead-letter queue '{q.topic}' "
                 "have no readable id: whether they are the window's lost records is not known",
                 "possible", ["their queue partitions and offsets are in the id file"])


def _where_stopped(snap: ConnectorSnapshot, topic: str) -> dict[int, int]:
    return snap.sink_offsets().get(topic, {})


def connector_loss(runs: Runs | None, ev: Evidence, snap: ConnectorSnapshot) -> Cause:
    """A consume-side loss into a sink connector's tier, from the connector's own evidence:
    its cluster that did not answer, a FAILED task, or records skipped under
    errors.tolerance=all with no dead-letter queue; else the commits of its group."""
    if snap.error:
        return cause("unknown", f"the sink connector '{snap.name}' could not be read, so its "
                     "state, config and offsets are not known", "unknown",
                     [snap.error, "missing: the connector's status, config and offsets"])
    committed = _where_stopped(snap, ev.topic_name)
    at = ", ".join(f"partition {p} at offset {o}"
                   for p, o in sorted(committed.items())) or "no offsets"
    relation = _relation(runs, committed) if runs and committed else None
    failed = snap.failed
    if failed:
        t = failed[0]
        trace = (t.trace or "").strip().splitlines()
        return cause("connector_task_failed",
                     f"sink connector '{snap.name}' has a FAILED task: it stopped at its "
                     "committed offsets, and the records after them are not loaded until it "
                     "is restarted", "likely" if relation in (None, "above") else "possible",
                     [t.said, f"the connector committed {at}"]
                     + ([f"the lost records sit at {_runs_text(runs)}"] if runs else [])
                     + ([f"trace: {' | '.join(x.strip() for x in trace[1:3])}"]
                        if len(trace) > 1 else []))
    if snap.tolerance == "all" and not snap.dead_letter_topic:
        evidence = ["the connector's config: errors.tolerance=all and no "
                    "errors.deadletterqueue.topic.name",
                    f"its tasks: {', '.join(t.said for t in snap.tasks) or 'none'}",
                    f"the connector committed {at}"]
        if runs:
            evidence.append(f"the lost records sit at {_runs_text(runs)}"
                            + (", below what it committed: it read them" if relation == "below"
                               else ""))
        if snap.config.get("errors.log.enable", "false").lower() == "true":
            evidence.append("errors.log.enable=true: the worker's log names each record "
                            "skipped")
        return cause("skipped_by_error_tolerance",
                     f"sink connector '{snap.name}' skipped records it could not write: "
                     "errors.tolerance=all drops them, and with no dead-letter queue no copy "
                     "is kept", "likely" if relation in (None, "below") else "possible",
                     evidence)
    group = f"connect-{snap.name}"
    if committed and group not in ev.committed:
        # the connector's own group, as its REST API shows it, for the commit rules
        ev = replace(ev, committed={**ev.committed, group: committed})
    return consume_loss(runs, ev)


def _connector_event_text(name: str, e: ConnectorEvent) -> str:
    when = f"between {e.between[0]} and {e.between[1]}"
    if e.event == "not_running":
        return f"connector '{name}' was {e.state} {when}"
    if e.event == "no_answer":
        return f"connector '{name}''s Connect cluster did not answer {when}"
    if e.event == "offsets_reset":
        return f"connector '{name}''s offsets were deleted {when}"
    if e.event == "snapshot_again":
        return f"connector '{name}' started a snapshot of its tables again {when}"
    what = "moved back" if e.event == "offsets_rewound" else "moved forward while it was stopped"
    return (f"connector '{name}''s committed offset on partition {e.partition} {what} from "
            f"{e.before} to {e.after} {when}")


def _source_events(ev: Evidence, *kinds: str) -> tuple[str, list[ConnectorEvent]]:
    """The source connector writing the evidence's topic, and its recorded events of `kinds`."""
    snap = ev.connectors.get(ev.topic)
    timeline = ev.connector_flight.get(ev.topic)
    if snap is None or snap.role != "source" or timeline is None:
        return "", []
    return snap.name, [e for e in timeline.events if e.event in kinds]


def source_duplicate(ev: Evidence, runs: Runs | None) -> Cause | None:
    """Copies in a topic its source connector wrote, when its offsets were lost or it read
    its tables again: a snapshot re-reads every row."""
    name, events = _source_events(ev, "offsets_reset", "snapshot_again")
    if not events:
        return None
    return cause("resnapshot",
                 f"source connector '{name}' lost its offsets and read its tables again: every "
                 "row it had captured was written to the topic once more", "likely",
                 [_connector_event_text(name, e) for e in events]
                 + ([f"the copies sit at {_runs_text(runs)}"] if runs else []))


# what a change-data-capture source's trace says when the position it resumes from is gone
# (Debezium: "... but this is no longer available on the server")
_POSITION_GONE = ("no longer available on the server", "replication slot", "requested WAL")


def source_loss(ev: Evidence, shape: Shape | None) -> Cause | None:
    """A loss into a topic its source connector writes: a FAILED task (its position gone, or
    any other failure), or a connector the recorder saw stopped or reset over the window (it
    resumed past the changes made meanwhile)."""
    snap = ev.connectors.get(ev.topic)
    if snap is not None and snap.role == "source" and snap.failed:
        t = snap.failed[0]
        name, spells = _source_events(ev, "not_running", "no_answer", "offsets_reset")
        said = [t.said] + [_connector_event_text(name, e) for e in spells] \
            + ([f"the lost rows: {_shape_text(shape)}"] if shape else [])
        if any(w in (t.trace or "") for w in _POSITION_GONE):
            return cause("source_position_lost",
                         f"source connector '{snap.name}' cannot resume: the position it "
                         "stopped at (its replication slot, or the WAL the slot held) is gone, "
                         "so its task FAILED and every row written since it stopped is not "
                         "captured", "likely", said)
        return cause("connector_task_failed",
                     f"source connector '{snap.name}' has a FAILED task: the rows written "
                     "since it stopped are not captured until it is restarted", "likely", said)
    name, events = _source_events(ev, "not_running", "no_answer", "offsets_reset")
    if not events:
        return None
    lo, hi = _parse(shape.first_time if shape else None), _parse(shape.last_time if shape
                                                                  else None)
    inside = [e for e in events if lo is not None and hi is not None
              and _parse(e.between[0]) is not None and _parse(e.between[1]) is not None
              and _parse(e.between[0]) <= hi and lo <= _parse(e.between[1])]  # type: ignore[operator]
    return cause("source_resumed_past_changes",
                 f"source connector '{name}' was not capturing while these rows were written, "
                 "and resumed past them: a replication slot dropped or recreated, or the "
                 "WAL it needed removed, while it was stopped",
                 "likely" if inside else "possible",
                 [_connector_event_text(name, e) for e in events]
                 + ([f"the lost rows: {_shape_text(shape)}"] if shape else [])
                 + ([] if inside else ["the lost rows' times were not placed inside the spell"]))


def sink_offsets_moved(ev: Evidence, sink: str, kind: str) -> Cause | None:
    """A sink connector whose committed offsets were rewound (copies) or moved forward while
    stopped (records skipped)."""
    snap, timeline = ev.connectors.get(sink), ev.connector_flight.get(sink)
    if snap is None or timeline is None:
        return None
    wanted = "offsets_rewound" if kind == "duplicate" else "offsets_altered"
    events = [e for e in timeline.events if e.event == wanted]
    if not events:
        return None
    if kind == "duplicate":
        return cause("sink_offsets_rewound",
                     f"sink connector '{snap.name}''s offsets were moved back: it loaded the "
                     "records after them again", "likely",
                     [_connector_event_text(snap.name, e) for e in events])
    return cause("sink_offsets_skipped",
                 f"sink connector '{snap.name}''s offsets were moved forward while it was "
                 "stopped: it never read the records in between", "likely",
                 [_connector_event_text(snap.name, e) for e in events])


def _late_text(late: AfterGrace, lost: int) -> str:
    when = f"timestamps {late.first} - {late.last}" if late.first != late.last \
        else f"timestamp {late.first}"
    return (f"{late.records} of the {lost} lost record(s) are in the topic, with Kafka "
            f"{when}: after its grace closed at {late.closed_at}")


def _stamps(outside: OutsideRead) -> str:
    return f"timestamps {outside.first} - {outside.last}" if outside.first != outside.last \
        else f"timestamp {outside.first}"


def _past_read_text(past: OutsideRead, lost: int) -> str:
    return (f"{past.records} of the {lost} lost record(s) are in the topic past the offsets "
            f"replayed, which end at each partition's first record stamped at or after "
            f"{past.bound} (the close plus the disorder margin): they were written after "
            f"it, though stamped with Kafka {_stamps(past)}")


def _before_read_text(before: OutsideRead, lost: int) -> str:
    return (f"{before.records} of the {lost} lost record(s) are in the topic before the "
            f"offsets replayed, which begin at each partition's first record stamped at or "
            f"after {before.bound} (the window's start less the disorder margin): stamped "
            f"with Kafka {_stamps(before)}, earlier than the margin allows; not lost")


def arrived_after_grace(late: AfterGrace | None, past: OutsideRead | None, lost: int
                        ) -> Cause:
    """A loss into a topic whose every record is in it, after its grace: sent late, stamped
    so (`late`) or written past the records stamped after the close (`past`)."""
    evidence = ([_late_text(late, lost)] if late else []) + \
        ([_past_read_text(past, lost)] if past else [])
    if late is not None:
        delay = (parse_instant(late.last, "an arrival")
                 - parse_instant(late.closed_at, "a close")).total_seconds()
        summary = (f"the records were sent late: they reached the topic after its grace had "
                   f"closed (the last {delay:.0f} s after the close)")
    else:
        summary = ("the records reached the topic after its grace had closed, behind records "
                   "stamped after it, though their own timestamps are earlier (a transaction "
                   "committed late, a backfill, a producer's clock)")
    return cause("arrived_after_grace",
                 f"{summary}; a window is closed when its grace ends, so they count as lost",
                 "likely",
                 [*evidence, "the topic was searched for the lost records up to each "
                             "partition's last stable offset when the window was replayed: a "
                             "record that came later still is not seen"])


def classify(finding: Finding, hop: HopTally | None, ev: Evidence) -> Cause | None:
    """The cause of one loss, duplicate or unexpected finding (None for other kinds). A loss
    into a topic whose records are in it after its grace was sent late; when only some are,
    that is said beside the cause of the rest."""
    into = hop if finding.kind == "loss" and finding.group is None \
        and finding.hop.split("->")[-1] == ev.topic else None
    late = into.missing_after_grace if into is not None else None
    before = into.missing_before_read if into is not None else None
    past = into.missing_past_read if into is not None else None
    came = (late.records if late else 0) + (past.records if past else 0)
    if came and came + (before.records if before else 0) >= finding.count:
        found: Cause | None = arrived_after_grace(late, past, finding.count)
    else:
        found = _classify(finding, hop, ev)
        if found is not None:
            found = found.model_copy(update={"evidence": [
                *found.evidence, *([_late_text(late, finding.count)] if late else []),
                *([_past_read_text(past, finding.count)] if past else [])]})
    if before is not None and found is not None:
        found = found.model_copy(update={"evidence": [
            *found.evidence, _before_read_text(before, finding.count)]})
    return found


def _classify(finding: Finding, hop: HopTally | None, ev: Evidence) -> Cause | None:
    """`classify`, after grace aside. A loss to retention is one whose `group` is the
    production group that never read the records."""
    kind, side = finding.kind, finding.side
    ends = finding.hop.split("->")
    out_of_topic = ends[0] == ev.topic
    into_topic = ends[-1] == ev.topic
    if kind == "loss" and finding.group is not None:
        return cause("retention_deleted_unread",
                     f"retention deleted records before group '{finding.group}' read them",
                     "likely",
                     [f"group '{finding.group}' had not consumed "
                      f"{finding.offsets if finding.offsets is not None else finding.count} "
                      "offset(s) that retention deleted"])
    if side == "process" and kind == "loss" and ev.committed:
        # a processor is a consumer of its source topic: its group's commits place the loss
        return consume_loss(hop.missing_runs if hop else None, ev)
    if side in ("replication", "process") and kind in ("loss", "duplicate"):
        return between_topics(kind, side, finding.hop, hop)
    sink = ev.connectors.get(ends[-1])
    if kind in ("loss", "duplicate") and out_of_topic and sink is not None \
            and sink.role == "sink" and (moved := sink_offsets_moved(ev, ends[-1], kind)):
        return moved
    if kind == "loss" and out_of_topic and sink is not None and sink.role == "sink":
        return connector_loss(hop.missing_runs if hop else None, ev, sink)
    if kind == "loss" and side == "write" and into_topic and (
            lost := source_loss(ev, hop.missing_shape if hop else None)):
        return lost
    if kind == "duplicate" and side == "write" and into_topic and (
            copies := source_duplicate(ev, hop.duplicate_runs if hop else None)):
        return copies
    if kind == "loss" and out_of_topic:
        restart = _restarted(ev.writers.get(ends[-1]) or [])
        if restart is not None:
            return checkpoint_reset(hop.missing_runs if hop else None, restart)
        return consume_loss(hop.missing_runs if hop else None, ev)
    if kind == "duplicate" and out_of_topic:
        return consume_duplicate(hop.duplicate_runs if hop else None, ev.tables.get(ends[-1]))
    if kind == "unexpected" and into_topic and hop is not None and hop.unexpected_inside:
        return rolled_back(finding, hop)
    if kind == "unexpected":
        return cause("written_by_someone_else",
                     "the records have no upstream record and never passed through the flow's "
                     "earlier tiers: something else wrote them", "possible",
                     [f"{finding.count} id(s) downstream of {finding.hop} with no record "
                      "upstream"])
    if kind == "loss" and len(ends) == 2 and ends[0].rsplit(".", 1)[0] == \
            ends[1].rsplit(".", 1)[0] and ends[0] in ev.restarts:
        return flume_loss(finding.hop, ev, hop.counter_gap if hop else None)
    if kind == "loss" and side == "write":
        return write_loss(hop.missing_shape if hop and into_topic else None, ev)
    if kind == "duplicate" and side == "write":
        return write_duplicate(hop.duplicate_runs if hop and into_topic else None, ev,
                               hop.duplicate_stamps if hop and into_topic else None)
    if kind in ("loss", "duplicate"):
        return cause("unknown", f"no evidence recorded points at a mechanism for this "
                     f"{side}-side {kind}", "unknown", ["missing: where the records sit"])
    return None
