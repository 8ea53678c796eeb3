"""The result of a run from the reconcile step's aggregates (docs/design.md, "Result").

The Spark step computes per-hop, per-bucket numbers and writes the id files; this module turns
those numbers into the typed result (`kafka_recon.result.model`), building each tier, hop and
finding as what it is: a finding is made with its tolerance and its cause, never patched later.
It is pure: the same inputs give the same answer under Airflow, from the command line and in the
tests.

The findings come in this order: each tier's unidentifiable and late records; each hop's loss,
duplicate and unexpected records (a write-side loss that retention explains withdrawn); the
losses to retention; replays that disagree; the audit's risks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

from kafka_recon.config import (
    Flow,
    FlumeTier,
    KafkaTier,
    SqlTier,
    TableTier,
    Tolerance,
    ToleranceKind,
)
from kafka_recon.result.bands import alarms
from kafka_recon.result.causes import Evidence, classify
from kafka_recon.result.model import (
    Bucket,
    Finding,
    Hop,
    Replay,
    Result,
    Side,
    Tier,
    WindowJson,
    decide_status,
)
from kafka_recon.runfiles.aggregates import Aggregates, HopTally, RetentionSplit, TierTally
from kafka_recon.runfiles.audit import Audit
from kafka_recon.runfiles.bands import Bands, BucketBand
from kafka_recon.runfiles.connectors import Connectors
from kafka_recon.runfiles.flight import Flight
from kafka_recon.runfiles.replays import ReplayRun, Replays, TopicReplays
from kafka_recon.sources.topic import PartitionRange, deleted_before_consumed, retention_cut
from kafka_recon.window import Window, iso_z, parse_instant

_MEASURES = ("expected", "observed", "missing", "unexpected", "duplicate")
# a hop's finding kinds, and the hop's count each reads
_HOP_KINDS: tuple[tuple[ToleranceKind, str], ...] = (
    ("loss", "missing"), ("duplicate", "duplicate"), ("unexpected", "unexpected"))


def _rel(path: str | None, out: str | None) -> str | None:
    if path is None or out is None:
        return path
    return os.path.relpath(path, out)


def _nonzero(buckets: dict[str, int]) -> list[str]:
    return sorted(k for k, v in buckets.items() if v)


def replays_consistent(replays: list[ReplayRun]) -> bool:
    return len({(r.count, r.distinct, r.fingerprint) for r in replays}) <= 1


def where_of(tier: SqlTier | FlumeTier | KafkaTier | TableTier) -> str:
    """Where a tier lives, from the flow config alone (no connection resolved, no password):
    a topic and its cluster, so a flow across clusters reads cluster by cluster."""
    from kafka_recon.sources.connections import redact

    if isinstance(tier, KafkaTier):
        return f"topic '{tier.topic}' on " + (f"kafka {tier.bootstrap}" if tier.bootstrap
                                              else f"connection '{tier.conn}'")
    if isinstance(tier, SqlTier):
        return redact(tier.conn) if "://" in tier.conn else f"connection '{tier.conn}'"
    if isinstance(tier, TableTier):
        return f"{tier.format} table {tier.table}"
    return f"flume agent at {tier.metrics_url} ({tier.source} -> {tier.sink})"


@dataclass
class Inputs:
    """What a result is built from, for one run."""

    flow: Flow
    window: Window
    aggregates: Aggregates
    replayed: Replays
    audit: Audit
    flight: Flight
    out: str | None
    reasons: list[str] = field(default_factory=list)
    connectors: Connectors = field(default_factory=Connectors)

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.flow.points]

    def side_into(self, name: str) -> Side:
        """The side of the hop into a point (the first point: write)."""
        at = self.names.index(name)
        return self.flow.side_of(self.names[at - 1]) if at else "write"  # type: ignore[return-value]

    def evidence(self) -> dict[str, Evidence]:
        """Each topic's evidence of causes: its groups' commits, its window's partitions, its
        audit and flight recorder timeline, and every Flume point's restarts."""
        restarts = {t.name: t.restarts for t in self.aggregates.tiers if t.restarts is not None}
        return {t.tier: Evidence(
            topic=t.tier, committed=t.committed_by_partition(),
            spans=dict(getattr(self.aggregates.tier(t.tier), "partitions", None) or {}),
            audit=self.audit.of_tier(t.tier, self.flow.topic_tier.name),
            flight=self.flight.of(t.tier), restarts=restarts,
            tables={x.name: x.format for x in self.flow.table_tiers},
            writers={x.name: x.writers for x in self.aggregates.tiers if x.writers},
            connectors={c.tier: c for c in self.connectors.connectors},
            connector_flight=self.flight.connectors,
            topic_name=next(k.topic for k in self.flow.kafka_tiers if k.name == t.tier))
            for t in self.replayed.topics}


def build_result(flow: Flow, window: Window, aggregates: Aggregates, replayed: Replays,
                 stage_reasons: list[str] | None = None, now: datetime | None = None,
                 out: str | None = None, audit: Audit | None = None,
                 flight: Flight | None = None, connectors: Connectors | None = None,
                 bands: Bands | None = None) -> Result:
    """The result of a run: `replayed` is each topic's replays, in the flow's order."""
    x = Inputs(flow, window, aggregates, replayed, audit or Audit(), flight or Flight(), out,
               list(stage_reasons or []), connectors or Connectors())
    several = len(replayed.topics) > 1
    findings = [f for t in aggregates.tiers for f in tier_findings(x, t)]
    withdrawn, lost_to_retention = retention_findings(x)
    evidence = x.evidence()
    first = evidence[flow.topic_tier.name]
    for h in aggregates.hops:
        ends = h.name.split("->")
        ev = evidence.get(ends[0]) or evidence.get(ends[-1]) or first
        findings += [f for f in hop_findings(x, h, ev) if (f.kind, f.hop) not in withdrawn]
    findings += [f.model_copy(update={"cause": classify(f, None, first)})
                 for f in lost_to_retention]
    consistent = True
    for topic in replayed.topics:
        disagree = replay_findings(x, topic, several)
        consistent = consistent and not disagree
        findings += disagree
    findings += volume_findings(x, bands or Bands(check="off"))
    findings += freshness_findings(x, bands or Bands(check="off"))
    findings += audit_findings(x)
    if not window.is_closed(now or datetime.now(UTC)):
        x.reasons.append(f"the window plus grace closes at {window.closes_at.isoformat()}: "
                         "records may still arrive")
    return Result(
        flow=flow.name, window=WindowJson(**window.as_json()),
        bucket_seconds=int(flow.bucket.total_seconds()),
        grace_seconds=int(flow.grace.total_seconds()),
        status=decide_status(findings, x.reasons),
        tiers=[tier_of(x, t) for t in aggregates.tiers],
        hops=[hop_of(x, h) for h in aggregates.hops],
        replays=[Replay(**({"tier": t.tier} if several else {}),
                        **r.model_dump(include={"group", "read", "count", "distinct",
                                                "unidentifiable", "fingerprint",
                                                "out_of_order"}))
                 for t in replayed.topics for r in t.replays],
        replays_consistent=consistent, findings=findings, reasons=x.reasons)


# ------------------------------------------------------------------ tiers and hops
def tier_of(x: Inputs, t: TierTally) -> Tier:
    topic = next((r for r in x.replayed.topics if r.tier == t.name), None)
    place = next((p for p in x.flow.points if p.name == t.name), None)
    return Tier(name=t.name, count=t.count, distinct=t.distinct,
                unidentifiable=t.unidentifiable,
                where=where_of(place.tier) if place else None,
                buckets=dict(sorted(t.buckets.items())),  # the chart and the history
                estimate=topic.estimate if topic else None,
                late=(t.late or 0) if topic else None, as_of=t.as_of,
                newest=t.newest, newest_arrival=t.newest_arrival)


def hop_of(x: Inputs, h: HopTally) -> Hop:
    keys = sorted({k for m in _MEASURES for k in getattr(h.buckets, m)})
    return Hop.model_validate({
        "from": h.from_, "to": h.to, "side": h.side, "exact": h.exact,
        **{m: getattr(h, m) for m in _MEASURES},
        "missing_ids": _rel(h.missing_ids, x.out),
        "unexpected_ids": _rel(h.unexpected_ids, x.out),
        "duplicate_ids": _rel(h.duplicate_ids, x.out),
        "buckets": [Bucket(bucket=k, **{m: getattr(h.buckets, m).get(k, 0) for m in _MEASURES})
                    for k in keys],
        # dropped on purpose by the processor
        **({"filtered": h.filtered, "filtered_ids": _rel(h.filtered_ids, x.out)}
           if h.filtered is not None else {}),
        # routed to a sink connector's dead-letter queue
        **({"dead_lettered": h.dead_lettered,
            "dead_lettered_ids": _rel(h.dead_lettered_ids, x.out),
            "dead_letter_topic": h.dead_letters.topic if h.dead_letters else None}
           if h.dead_lettered is not None else {}),
        # a counted loss whose ids the id tiers around it name
        **({"ids_between": h.ids_between} if h.ids_between else {})})


# ------------------------------------------------------------------ findings
def tier_findings(x: Inputs, t: TierTally) -> list[Finding]:
    """A tier's records without a readable id, and its records that came late (not loss:
    reported, never a failure)."""
    side = x.side_into(t.name)
    out = []
    if t.unidentifiable:
        out.append(Finding(kind="unidentifiable", side=side, hop=t.name, count=t.unidentifiable,
                           ids=_rel(t.unidentifiable_file, x.out),
                           buckets=_nonzero(t.unidentifiable_buckets), within_tolerance=False))
    if t.late:
        at = x.names.index(t.name)
        prev = x.names[at - 1] if at else t.name
        out.append(Finding(kind="late", side=side, hop=f"{prev}->{t.name}", count=t.late,
                           ids=_rel(t.late_file, x.out), buckets=_nonzero(t.late_buckets),
                           within_tolerance=True))
    return out


def hop_findings(x: Inputs, h: HopTally, ev: Evidence) -> list[Finding]:
    """A hop's loss, duplicate and unexpected records, each against the hop's tolerance and
    with its probable cause. Lost records the loss search found before the offsets replayed
    are in the topic: the topic's count is short by them, so the run is not judged."""
    before = h.missing_before_read
    if before is not None:
        x.reasons.append(
            f"{before.records} of the {h.missing} record(s) missing from topic '{h.to}' are "
            f"in it before the offsets replayed for the window (stamped_out_of_order): "
            f"stamped {before.first} - {before.last}, earlier than its start less the disorder "
            f"margin ({before.bound}), so the offsets found by timestamp miss records of the "
            f"window and its count is short; raise the flow's disorder margin above the "
            f"producers' clock skew and re-run")
    tolerance = x.flow.tolerance_into(h.to)
    out = []
    for kind, key in _HOP_KINDS:
        count: int = getattr(h, key)
        if count <= 0 or (kind == "loss" and before is not None and before.records >= count):
            continue  # every record lost into the topic is in it: nothing lost, not judged
        allowed = tolerance.allowed(kind, h.expected)
        found = Finding(kind=kind, side=h.side, hop=h.name, count=count,
                        ids=_rel(getattr(h, f"{key}_ids"), x.out),
                        buckets=_nonzero(getattr(h.buckets, key)),
                        within_tolerance=count <= allowed, allowed=allowed)
        out.append(found.model_copy(update={"cause": classify(found, h, ev)}))
    return out + dead_letter_findings(x, h, tolerance)


def dead_letter_findings(x: Inputs, h: HopTally, tolerance: Tolerance) -> list[Finding]:
    """A hop into a sink connector: the records it routed to its dead-letter queue (their own
    kind, failing the window beyond `tolerance.dead_lettered`), and the queue's records of the
    window whose id cannot be read."""
    from kafka_recon.result.causes import dead_letter_cause, unreadable_dead_letters

    q = h.dead_letters
    if q is None:
        return []
    out = []
    if h.dead_lettered:
        allowed = tolerance.allowed("dead_lettered", h.expected)
        out.append(Finding(kind="dead_lettered", side=h.side, hop=h.name, count=h.dead_lettered,
                           ids=_rel(h.dead_lettered_ids, x.out), topic=q.topic,
                           buckets=_nonzero(h.buckets.dead_lettered or {}),
                           within_tolerance=h.dead_lettered <= allowed, allowed=allowed,
                           cause=dead_letter_cause(q, h.dead_lettered)))
    if q.unidentifiable:
        out.append(Finding(kind="unidentifiable", side=h.side, hop=h.name,
                           count=q.unidentifiable, ids=_rel(q.unidentifiable_file, x.out),
                           topic=q.topic, within_tolerance=False,
                           cause=unreadable_dead_letters(q)))
    return out


def replay_findings(x: Inputs, topic: TopicReplays, several: bool) -> list[Finding]:
    """Replays of one topic that disagree (a finding and a reason), and timestamps out of
    order beyond the disorder margin (a reason)."""
    named = f"topic '{topic.tier}'" if several else "the topic"
    disorder = max((r.out_of_order or 0 for r in topic.replays), default=0)
    if disorder:
        x.reasons.append(
            f"{disorder} record(s) between the offsets replayed for the window carry Kafka "
            f"timestamps outside it by more than the flow's disorder margin "
            f"({topic.disorder_seconds}s): {named}'s timestamps are out of "
            f"order, so records of the window may also lie outside the offsets found by "
            f"timestamp")
    if replays_consistent(topic.replays):
        return []
    x.reasons.append(f"replays of the same window disagree: {named} changed while it "
                     "was read (retention, truncation after an unclean election)")
    return [Finding(kind="replay_unstable", side=x.side_into(topic.tier), hop=topic.tier,
                    count=len(topic.replays), within_tolerance=False)]


def volume_findings(x: Inputs, bands: Bands) -> list[Finding]:
    """Each tier's buckets outside the band its history expects, consecutive ones of one
    direction as one finding: a `warn` check reports it (within tolerance), `fail` fails the
    window with it. Even every tier agreeing on zero is found."""
    if bands.check == "off":
        return []
    out: list[Finding] = []
    for t in x.aggregates.tiers:
        for way, run in _outside(bands.of(t.name), t.buckets, x.flow.bucket):
            out.append(Finding(
                kind="volume", side=x.side_into(t.name), hop=t.name,
                count=sum(n for _, n in run), buckets=[b.bucket for b, _ in run],
                band=[sum(b.low for b, _ in run), sum(b.high for b, _ in run)],
                direction=way, why=run[0][0].basis, within_tolerance=bands.check == "warn"))
    return out


def freshness_findings(x: Inputs, bands: Bands) -> list[Finding]:
    """Each id tier whose newest record of the window is older than the window's end by more
    than the flow's `freshness.after`, or, without it, by more than its history's usual lag
    and a bucket: it stopped then (a warn check reports it, fail fails the window). A
    count-only tier has no record times, and a tier without a set or learned lag is not
    judged."""
    f = x.flow.freshness
    if f.check == "off":
        return []
    out = []
    for t in x.aggregates.tiers:
        usual = bands.usual_lag.get(t.name)
        if not t.exact or (f.after is None and usual is None):
            continue
        allowed = f.after if f.after is not None \
            else timedelta(seconds=usual or 0) + x.flow.bucket
        said = "" if f.after is not None else " (its usual lag, learned from its history, " \
            "and a bucket)"
        newest = parse_instant(t.newest, f"tier '{t.name}'") if t.newest else None
        if newest is None or newest < x.window.end - allowed:
            out.append(Finding(kind="freshness", side=x.side_into(t.name), hop=t.name,
                               count=t.count, newest=t.newest, within_tolerance=f.check == "warn",
                               why=f"no record after {t.newest or 'the window start'}, more "
                                   f"than {_span(allowed)} before the window's end{said}"))
    return out


def _span(d: timedelta) -> str:
    s = int(d.total_seconds())
    h, m = divmod(s // 60, 60)
    return f"{h}h{m:02d}m" if h and m else f"{h}h" if h else f"{m}m" if m else f"{s}s"


def _outside(bands: list[BucketBand], counts: dict[str, int], step: timedelta
             ) -> list[tuple[Literal["too few", "too many"], list[tuple[BucketBand, int]]]]:
    """The alarms among the window's buckets (`result.bands.alarms`: two or more consecutive
    buckets out of their bands one way, or one beyond its far band), each with its buckets'
    counts. A bucket without a band breaks a run."""
    slots: list[tuple[int, BucketBand | None]] = []
    by_start = {b.bucket: b for b in bands}
    if bands:
        t = min(parse_instant(b.bucket, "bands.json") for b in bands)
        last = max(parse_instant(b.bucket, "bands.json") for b in bands)
        while t <= last:
            band = by_start.get(iso_z(t))
            slots.append((counts.get(iso_z(t), 0), band))
            t += step
    out: list[tuple[Literal["too few", "too many"], list[tuple[BucketBand, int]]]] = []
    for run in alarms(slots):
        got = [(slots[i][1], slots[i][0]) for i in run]
        first, n = got[0]
        assert first is not None
        out.append(("too few" if n < first.low else "too many",
                    [(b, c) for b, c in got if b is not None]))
    return out


def audit_findings(x: Inputs) -> list[Finding]:
    """What will be lost next, and why: never the loss verdict itself."""
    out = []
    for a in x.audit.risks:
        out.append(Finding.model_validate({
            **a.model_dump(exclude={"tier"}), "hop": a.tier or x.flow.topic_tier.name,
            "count": 1, "within_tolerance": True}))
        if a.blocking:
            x.reasons.append(f"{a.rule}: {a.observed} - the window may not be readable whole")
    return out


# ------------------------------------------------------------------ retention
def retention_findings(x: Inputs) -> tuple[set[tuple[str, str]], list[Finding]]:
    """Each topic's losses to retention, and the write-side losses retention explains (to be
    withdrawn, as (kind, hop)). Reasons go to `x.reasons`."""
    splits = {s.topic: s for s in x.aggregates.retention}
    withdrawn: set[tuple[str, str]] = set()
    out: list[Finding] = []
    for topic in x.replayed.topics:
        seen = x.flight.of(topic.tier).deleted_unread
        lost = retention_losses(x, topic, seen)
        gone, lost = explain_by_retention(x, lost, splits.get(topic.tier))
        withdrawn |= gone
        out += lost
    return withdrawn, out


def retention_losses(x: Inputs, topic: TopicReplays, seen: dict[str, int] | None = None
                     ) -> list[Finding]:
    """Losses to retention out of a topic's window, and the reasons its window is incomplete.
    `seen`: per group, the offsets the flight recorder saw retention delete below its commit
    (a group that has since jumped past them)."""
    tier = next(t for t in x.flow.kafka_tiers if t.name == topic.tier)
    ranges = [PartitionRange(**o.model_dump()) for o in topic.offsets]
    cut = retention_cut(ranges, Window.millis(x.window.start))
    if cut:
        x.reasons.append(f"retention already deleted the start of the window from topic "
                         f"'{tier.topic}' (partitions {cut}): deleted records cannot be counted")
    names = x.names
    after = names[names.index(tier.name) + 1] if names[-1] != tier.name else tier.name
    lost_now = deleted_before_consumed(ranges, topic.committed_by_partition())
    # the recorder's sightings count only while the window itself was cut: earlier gaps are
    # other windows' records
    ever = {g: max(n, lost_now.get(g, 0)) for g, n in (seen or {}).items()} if cut else {}
    out = []
    for group, lost in sorted({**lost_now, **ever}.items()):
        out.append(Finding(kind="loss", side=x.flow.side_of(tier.name) if after != tier.name
                           else "consume", hop=f"{tier.name}->{after}", count=lost,
                           group=group, within_tolerance=False))
        x.reasons.append(f"consumer group '{group}' had not consumed {lost} offsets of topic "
                         f"'{tier.topic}' that retention deleted: they are lost to it")
    return out


def explain_by_retention(x: Inputs, retention: list[Finding], split: RetentionSplit | None
                         ) -> tuple[set[tuple[str, str]], list[Finding]]:
    """Records retention deleted from the topic are not a write-side loss, when it adds up.

    If exactly one production group lost offsets to retention, and no more records are
    missing from both the topic and the sink than the offsets it never read, those ids are its
    retention loss; the rest missing from the topic had been consumed before deletion. The
    write-side loss at the topic is then explained and withdrawn (returned as (kind, hop)).
    Otherwise nothing is withdrawn: the numbers do not add up, and the run stays inconclusive.
    """
    if not split:
        return set(), retention
    topic = next(t for t in x.flow.kafka_tiers if t.name == split.topic)
    write_hop = f"{split.from_}->{topic.name}"
    write = next((h for h in x.aggregates.hops if h.name == write_hop and h.missing > 0), None)
    unread = split.unread
    deleted_unread = sum(f.count for f in retention)
    # offsets deleted unread bound the records lost from above: some were outside the window,
    # transaction markers, or processed but not yet committed when the consumer stopped
    consistent = (len(retention) == 1 and unread <= deleted_unread) if retention \
        else unread == 0
    if write and write.missing != split.missing_from_topic:
        consistent = False
    if not consistent:
        x.reasons.append(f"{unread} record(s) are missing from both the topic and "
                         f"'{split.to}', but the production groups left {deleted_unread} "
                         "offset(s) unread before retention deleted them: write-side and "
                         "retention loss cannot be told apart")
        return set(), retention
    if retention and not unread:
        x.reasons.append(f"'{split.to}' holds every record retention deleted: none was lost "
                         "to it")
        retention = []
    explained = [f.model_copy(update={"count": unread, "offsets": deleted_unread,
                                      "ids": _rel(split.unread_ids, x.out)})
                 for f in retention]
    if write is None:
        return set(), explained
    consumed = split.missing_from_topic - unread
    x.reasons.append(f"the {write.missing} record(s) missing from topic "
                     f"'{topic.topic}' were deleted by retention, not lost on the "
                     f"{write.side} side: {consumed} had been consumed into "
                     f"'{split.to}', {unread} never were")
    return {("loss", write_hop)}, explained
