"""Why: a probable cause for each loss, duplicate and unexpected finding, from evidence the
cluster already holds (no client is touched).

Each cause has a code, a summary, a confidence and the evidence it rests on:

- `likely`: the run's own measurements show the mechanism (where the records sit in the topic
  against what the production group committed);
- `possible`: the evidence fits but does not single the mechanism out (one of several groups,
  scattered singles, or the audit's configuration rules alone, which corroborate but are never
  the only ground for `likely`);
- `unknown`: says which evidence was missing.

This module is pure: the reconcile step's aggregates, the replay's committed offsets and the
audit's rows in, causes out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafka_recon.sources.topic import NO_COMMIT


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
    "unknown": Known("004", "Follow seed 004's steps: confirm the loss, locate the hop, then "
                            "check the hop's clients and the brokers' logs for the window."),
}


def cause(code: str, summary: str, confidence: str, evidence: list[str]) -> dict[str, Any]:
    known = CAUSES[code]
    return {"code": code, "summary": summary, "confidence": confidence,
            "evidence": evidence, "seed": known.seed, "fix": known.fix}


def _run_text(r: dict[str, Any]) -> str:
    span = f"offsets {r['first_offset']}-{r['last_offset']}" \
        if r["first_offset"] != r["last_offset"] else f"offset {r['first_offset']}"
    return f"partition {r['partition']}, {span} ({r['records']} record(s))"


def _runs_text(runs: dict[str, Any], shown: int = 3) -> str:
    largest = runs["largest"][:shown]
    more = runs["runs"] - len(largest)
    return "; ".join(_run_text(r) for r in largest) + (f"; and {more} more run(s)"
                                                      if more > 0 else "")


def _batched(runs: dict[str, Any]) -> bool:
    """Contiguous batches (as a consumer fetches and commits), not scattered single records."""
    return runs["records"] >= 2 * runs["runs"]


def _relation(runs: dict[str, Any], committed: dict[int, int]) -> str:
    """`below` when every run ends before the group's committed offset on its partition,
    `above` when every run starts at or after it (or the group never committed there), else
    `mixed`."""
    rel = set()
    for r in runs["largest"]:
        c = committed.get(int(r["partition"]), NO_COMMIT)
        if c != NO_COMMIT and r["last_offset"] < c:
            rel.add("below")
        elif c == NO_COMMIT or r["first_offset"] >= c:
            rel.add("above")
        else:
            rel.add("mixed")
    return rel.pop() if len(rel) == 1 else "mixed"


def _audit_says(audit: list[dict[str, Any]], *rules: str) -> list[str]:
    return [f"the audit found {a['observed']} (rule {a['rule']})" for a in audit
            if a.get("rule") in rules]


def consume_loss(runs: dict[str, Any] | None, committed: dict[str, dict[int, int]],
                 spans: dict[str, dict[str, int]], audit: list[dict[str, Any]]
                 ) -> dict[str, Any]:
    """A consume-side loss, from where its records sit against the groups' commits."""
    if not runs:
        return cause("unknown", "the lost records could not be located in the topic",
                     "unknown", ["no offsets were found for the missing ids"])
    where = _runs_text(runs)
    if not committed:
        return cause("unknown", "no production consumer group is declared for the topic, so "
                     "the loss cannot be compared with what the consumer committed", "unknown",
                     [f"the lost records sit at {where}",
                      "missing: the flow's consumer_groups (committed offsets)"])
    if len(runs["largest"]) < runs["runs"]:
        return cause("unknown", f"the lost records are spread over {runs['runs']} runs of "
                     "offsets, too scattered to compare each with the groups' commits",
                     "unknown", [f"the largest runs: {where}"])
    relations = {g: _relation(runs, offs) for g, offs in committed.items()}
    below = [g for g, r in relations.items() if r == "below"]
    above = [g for g, r in relations.items() if r == "above"]
    one = len(committed) == 1
    if below:
        g = below[0]
        whole = [p for p, span in spans.items() if any(
            int(r["partition"]) == int(p) and r["records"] == span["records"]
            for r in runs["largest"])]
        others_whole = runs["partitions"] == len(whole) and len(spans) > len(whole)
        evidence = [f"the lost records sit at {where}",
                    f"all of them below the offsets group '{g}' committed"]
        if others_whole:
            return cause("partition_not_consumed",
                         f"whole partitions ({', '.join(whole)}) never reached the sink while "
                         f"group '{g}' committed past them and the other partitions arrived "
                         "whole: another application sharing the group id may have consumed "
                         "them", "possible", evidence + [
                             "missing: the group's members over the window (the flight "
                             "recorder)"])
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


def consume_duplicate(runs: dict[str, Any] | None) -> dict[str, Any]:
    if not runs:
        return cause("unknown", "the duplicated records could not be located in the topic",
                     "unknown", ["no offsets were found for the duplicated ids"])
    evidence = [f"the records written twice sit at {_runs_text(runs)}"]
    if _batched(runs):
        return cause("redelivery_after_crash",
                     "a batch was delivered again: the consumer wrote it and stopped before "
                     "committing, and its successor read it again from the last commit",
                     "likely", evidence)
    return cause("redelivery_after_crash", "records were delivered again, one by one",
                 "possible", evidence + ["the copies are scattered singles, not a batch: the "
                                         "sink's own retries may have written them twice"])


def classify(finding: dict[str, Any], hop: dict[str, Any] | None, topic_name: str,
             committed: dict[str, dict[int, int]], spans: dict[str, dict[str, int]],
             audit: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The cause of one loss, duplicate or unexpected finding (None for other kinds)."""
    kind, side = finding["kind"], finding["side"]
    out_of_topic = finding["hop"].startswith(f"{topic_name}->")
    if kind == "loss" and finding.get("cause") == "retention":
        return cause("retention_deleted_unread",
                     f"retention deleted records before group '{finding.get('group')}' read "
                     "them", "likely",
                     [f"group '{finding.get('group')}' had not consumed "
                      f"{finding.get('offsets', finding['count'])} offset(s) that retention "
                      "deleted"])
    if kind == "loss" and out_of_topic:
        return consume_loss((hop or {}).get("missing_runs"), committed, spans, audit)
    if kind == "duplicate" and out_of_topic:
        return consume_duplicate((hop or {}).get("duplicate_runs"))
    if kind == "unexpected":
        return cause("written_by_someone_else",
                     "the records have no upstream record and never passed through the flow's "
                     "earlier tiers: something else wrote them", "possible",
                     [f"{finding['count']} id(s) downstream of {finding['hop']} with no record "
                      "upstream"])
    if kind == "loss" and side == "write":
        hints = _audit_says(audit, "P1-acks", "T4-unclean-election", "T2-min-isr")
        if hints:
            return cause("lagging_replica_elected",
                         "the settings allow a lagging replica to become leader and truncate "
                         "acknowledged records", "possible", hints + [
                             "missing: the partitions' leaders and ISR over the window (the "
                             "flight recorder), which would show it happened"])
    if kind == "duplicate" and side == "write":
        hints = _audit_says(audit, "P2-idempotence")
        if hints:
            return cause("retries_without_idempotence",
                         "the producer retries without idempotence: a retried batch whose "
                         "first send had succeeded is written twice", "possible", hints)
    if kind in ("loss", "duplicate"):
        return cause("unknown", f"no evidence recorded yet points at a mechanism for this "
                     f"{side}-side {kind}", "unknown",
                     ["missing: the partitions' leaders, ISR and the producers' errors over "
                      "the window (the flight recorder)" if side == "write" else
                      "missing: where the records sit in the topic"])
    return None
