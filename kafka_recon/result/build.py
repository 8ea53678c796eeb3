"""Findings, reasons and status from the reconcile step's aggregates (DESIGN.md, "Result").

The Spark step computes per-hop, per-bucket numbers and writes the id files; this module turns
those numbers into the typed result (`kafka_recon.result.model`). It is pure: the same inputs
give the same answer under Airflow, from the command line and in the tests.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from kafka_recon.config import Flow, FlumeTier, KafkaTier, SqlTier, ToleranceKind
from kafka_recon.result.causes import Evidence, classify
from kafka_recon.result.model import Result, decide_status
from kafka_recon.sources.topic import PartitionRange, deleted_before_consumed, retention_cut
from kafka_recon.window import Window

_MEASURES = ("expected", "observed", "missing", "unexpected", "duplicate")


def _rel(path: str | None, out: str | None) -> str | None:
    if path is None or out is None:
        return path
    return os.path.relpath(path, out)


def _bucket_rows(buckets: dict[str, dict[str, int]]) -> list[dict[str, Any]]:
    keys = sorted({k for m in _MEASURES for k in buckets.get(m, {})})
    return [{"bucket": k, **{m: buckets.get(m, {}).get(k, 0) for m in _MEASURES}} for k in keys]


def _nonzero(buckets: dict[str, int]) -> list[str]:
    return sorted(k for k, v in buckets.items() if v)


def replays_consistent(replays: list[dict[str, Any]]) -> bool:
    return len({(r["count"], r["distinct"], r["fingerprint"]) for r in replays}) <= 1


def retention_reasons(flow: Flow, window: Window, topic: dict[str, Any],
                      seen: dict[str, int] | None = None
                      ) -> tuple[list[str], list[dict[str, Any]]]:
    """Reasons a topic's window is incomplete, and losses to retention out of it (`topic`:
    its entry of replays.json). `seen`: per group, the offsets the flight recorder saw
    retention delete below its commit (a group that has since jumped past them)."""
    reasons: list[str] = []
    findings: list[dict[str, Any]] = []
    tier = next(t for t in flow.kafka_tiers if t.name == topic["tier"])
    ranges = [PartitionRange(**o) for o in topic.get("offsets", [])]
    cut = retention_cut(ranges, Window.millis(window.start))
    if cut:
        reasons.append(f"retention already deleted the start of the window from topic "
                       f"'{tier.topic}' (partitions {cut}): deleted records cannot be counted")
    names = [p.name for p in flow.points]
    after = names[names.index(tier.name) + 1] if names[-1] != tier.name else tier.name
    # replays.json keeps partitions as JSON keys: strings
    committed = {g: {int(p): off for p, off in offs.items()}
                 for g, offs in topic.get("committed", {}).items()}
    lost_now = deleted_before_consumed(ranges, committed)
    # the recorder's sightings count only while the window itself was cut: earlier gaps are
    # other windows' records
    ever = {g: max(n, lost_now.get(g, 0)) for g, n in (seen or {}).items()} if cut else {}
    for group, lost in sorted({**lost_now, **ever}.items()):
        findings.append({"kind": "loss", "side": flow.side_of(tier.name) if after != tier.name
                         else "consume", "hop": f"{tier.name}->{after}",
                         "count": lost, "ids": None, "cause": "retention", "group": group,
                         "buckets": [], "within_tolerance": False})
        reasons.append(f"consumer group '{group}' had not consumed {lost} offsets of topic "
                       f"'{tier.topic}' that retention deleted: they are lost to it")
    return reasons, findings


def explain_by_retention(findings: list[dict[str, Any]], retention: list[dict[str, Any]],
                         split: dict[str, Any] | None, flow: Flow, out: str | None,
                         reasons: list[str]) -> list[dict[str, Any]]:
    """Records retention deleted from the topic are not a write-side loss, when it adds up.

    If exactly one production group lost offsets to retention, and no more records are
    missing from both the topic and the sink than the offsets it never read, those ids are its
    retention loss; the rest missing from the topic had been consumed before deletion. The
    write-side loss at the topic is then explained and withdrawn. Otherwise nothing is
    withdrawn: the numbers do not add up, and the run stays inconclusive.
    """
    if not split:
        return findings + retention
    topic = next(t for t in flow.kafka_tiers if t.name == split["topic"])
    write_hop = f"{split['from']}->{topic.name}"
    write = [f for f in findings if f["kind"] == "loss" and f["hop"] == write_hop]
    unread = split["unread"]
    deleted_unread = sum(f["count"] for f in retention)
    # offsets deleted unread bound the records lost from above: some were outside the window,
    # transaction markers, or processed but not yet committed when the consumer stopped
    consistent = (len(retention) == 1 and unread <= deleted_unread) if retention \
        else unread == 0
    if write and write[0]["count"] != split["missing_from_topic"]:
        consistent = False
    if not consistent:
        reasons.append(f"{unread} record(s) are missing from both the topic and "
                       f"'{split['to']}', but the production groups left {deleted_unread} "
                       "offset(s) unread before retention deleted them: write-side and "
                       "retention loss cannot be told apart")
        return findings + retention
    if retention and not unread:
        reasons.append(f"'{split['to']}' holds every record retention deleted: none was lost "
                       "to it")
        retention = []
    for f in retention:
        f.update(count=unread, offsets=deleted_unread, ids=_rel(split["unread_ids"], out))
    consumed = split["missing_from_topic"] - unread
    if write:
        reasons.append(f"the {write[0]['count']} record(s) missing from topic "
                       f"'{topic.topic}' were deleted by retention, not lost on the "
                       f"{write[0]['side']} side: {consumed} had been consumed into "
                       f"'{split['to']}', {unread} never were")
    return [f for f in findings if f not in write] + retention


def where_of(tier: SqlTier | FlumeTier | KafkaTier) -> str:
    """Where a tier lives, from the flow config alone (no connection resolved, no password):
    a topic and its cluster, so a flow across clusters reads cluster by cluster."""
    from kafka_recon.sources.connections import redact

    if isinstance(tier, KafkaTier):
        return f"topic '{tier.topic}' on " + (f"kafka {tier.bootstrap}" if tier.bootstrap
                                              else f"connection '{tier.conn}'")
    if isinstance(tier, SqlTier):
        return redact(tier.conn) if "://" in tier.conn else f"connection '{tier.conn}'"
    return f"flume agent at {tier.metrics_url} ({tier.source} -> {tier.sink})"


def flight_of(flight: dict[str, Any] | None, tier: str) -> dict[str, Any]:
    """One topic's flight recorder timeline out of flight.json (`{"topics": {tier: ...}}`)."""
    return dict(((flight or {}).get("topics") or {}).get(tier) or {})


def attach_causes(findings: list[dict[str, Any]], flow: Flow, aggregates: dict[str, Any],
                  topics: list[dict[str, Any]], audit: list[dict[str, Any]],
                  flight: dict[str, Any] | None = None) -> None:
    """Each loss, duplicate and unexpected finding gets its probable cause (result.causes),
    read from the evidence of the topic the finding's hop leaves, else enters (each topic with
    its own flight recorder timeline)."""
    hops = {f"{h['from']}->{h['to']}": h for h in aggregates["hops"]}
    evs = {t["tier"]: Evidence(
        topic=t["tier"],
        committed={g: {int(p): off for p, off in offs.items()}
                   for g, offs in t.get("committed", {}).items()},
        spans=next((a.get("partitions") or {} for a in aggregates["tiers"]
                    if a["name"] == t["tier"]), {}),
        audit=[a for a in audit if a.get("tier", flow.topic_tier.name) == t["tier"]],
        flight=flight_of(flight, t["tier"]),
        restarts={a["name"]: int(a["restarts"]) for a in aggregates["tiers"]
                  if "restarts" in a}) for t in topics}
    first = evs[flow.topic_tier.name]
    for f in findings:
        ends = f["hop"].split("->")
        ev = evs.get(ends[0]) or evs.get(ends[-1]) or first
        found = classify(f, hops.get(f["hop"]), ev)
        if found is not None:
            f["cause"] = found


def build_result(flow: Flow, window: Window, aggregates: dict[str, Any],
                 replayed: dict[str, Any], stage_reasons: list[str] | None = None,
                 now: datetime | None = None, out: str | None = None,
                 audit: list[dict[str, Any]] | None = None,
                 flight: dict[str, Any] | None = None) -> Result:
    """The result of a run: `replayed` is replays.json (each topic's replays, flow order)."""
    topics = replayed["topics"]
    by_tier = {t["tier"]: t for t in topics}
    several = len(topics) > 1
    replays = [{**({"tier": t["tier"]} if several else {}),
                **{k: r[k] for k in ("group", "read", "count", "distinct", "unidentifiable",
                                     "fingerprint", "out_of_order") if k in r}}
               for t in topics for r in t["replays"]]
    names = [p.name for p in flow.points]
    tiers, hops, findings = [], [], []
    reasons = list(stage_reasons or [])

    def side_into(name: str) -> str:
        """The side of the hop into a point (the first point: write)."""
        at = names.index(name)
        return flow.side_of(names[at - 1]) if at else "write"

    places = {p.name: where_of(p.tier) for p in flow.points}
    for t in aggregates["tiers"]:
        tier = {k: t.get(k) for k in ("name", "count", "distinct", "unidentifiable")}
        tier["where"] = places.get(t["name"])
        tier["buckets"] = dict(sorted((t.get("buckets") or {}).items()))  # chart and history
        if t["name"] in by_tier:
            tier["estimate"] = by_tier[t["name"]].get("estimate")
            tier["late"] = t.get("late", 0)
        tiers.append(tier)
        side = side_into(t["name"])
        if t.get("unidentifiable"):
            findings.append({"kind": "unidentifiable", "side": side, "hop": t["name"],
                             "count": t["unidentifiable"],
                             "ids": _rel(t.get("unidentifiable_file"), out),
                             "buckets": _nonzero(t.get("unidentifiable_buckets", {})),
                             "within_tolerance": False})
        if t.get("late"):
            prev = names[names.index(t["name"]) - 1] if names.index(t["name"]) else t["name"]
            findings.append({"kind": "late", "side": side, "hop": f"{prev}->{t['name']}",
                             "count": t["late"], "ids": _rel(t.get("late_file"), out),
                             "buckets": _nonzero(t.get("late_buckets", {})),
                             # late is not loss: reported, never a failure
                             "within_tolerance": True})

    for h in aggregates["hops"]:
        hop = {"from": h["from"], "to": h["to"], "side": h["side"], "exact": h["exact"],
               **{m: h[m] for m in _MEASURES},
               "missing_ids": _rel(h.get("missing_ids"), out),
               "unexpected_ids": _rel(h.get("unexpected_ids"), out),
               "duplicate_ids": _rel(h.get("duplicate_ids"), out),
               "buckets": _bucket_rows(h["buckets"])}
        if h.get("filtered") is not None:  # dropped on purpose by the processor
            hop.update(filtered=h["filtered"], filtered_ids=_rel(h.get("filtered_ids"), out))
        if h.get("ids_between"):  # a counted loss whose ids the id tiers around it name
            hop["ids_between"] = h["ids_between"]
        hops.append(hop)
        name = f"{h['from']}->{h['to']}"
        tolerance = flow.tolerance_into(h["to"])
        kinds: tuple[tuple[ToleranceKind, str], ...] = (
            ("loss", "missing"), ("duplicate", "duplicate"), ("unexpected", "unexpected"))
        for kind, key in kinds:
            if h[key] > 0:
                allowed = tolerance.allowed(kind, h["expected"])
                findings.append({"kind": kind, "side": h["side"], "hop": name, "count": h[key],
                                 "ids": hop[f"{key}_ids"],
                                 "buckets": _nonzero(h["buckets"].get(key, {})),
                                 "within_tolerance": h[key] <= allowed, "allowed": allowed})

    splits = {s["topic"]: s for s in aggregates.get("retention", [])}
    for topic in topics:
        seen = flight_of(flight, topic["tier"]).get("deleted_unread")
        more_reasons, retention_findings = retention_reasons(flow, window, topic, seen)
        reasons += more_reasons
        findings = explain_by_retention(findings, retention_findings,
                                        splits.get(topic["tier"]), flow, out, reasons)
    attach_causes(findings, flow, aggregates, topics, audit or [], flight)
    consistent = True
    for topic in topics:
        named = f"topic '{topic['tier']}'" if several else "the topic"
        disorder = max((r.get("out_of_order") or 0 for r in topic["replays"]), default=0)
        if disorder:
            reasons.append(
                f"{disorder} record(s) between the offsets replayed for the window carry Kafka "
                f"timestamps outside it by more than the flow's disorder margin "
                f"({topic.get('disorder_seconds', 0)}s): {named}'s timestamps are out of "
                f"order, so records of the window may also lie outside the offsets found by "
                f"timestamp")
        if not replays_consistent(topic["replays"]):
            consistent = False
            findings.append({"kind": "replay_unstable", "side": side_into(topic["tier"]),
                             "hop": topic["tier"], "count": len(topic["replays"]),
                             "ids": None, "buckets": [], "within_tolerance": False})
            reasons.append(f"replays of the same window disagree: {named} changed while it "
                           "was read (retention, truncation after an unclean election)")
    for a in audit or []:
        # what will be lost next, and why: never the loss verdict itself
        findings.append({**{k: v for k, v in a.items() if k != "tier"},
                         "hop": a.get("tier", flow.topic_tier.name), "count": 1, "ids": None,
                         "buckets": [], "within_tolerance": True})
        if a.get("blocking"):
            reasons.append(f"{a['rule']}: {a['observed']} - the window may not be readable "
                           "whole")
    if not window.is_closed(now or datetime.now(UTC)):
        reasons.append(f"the window plus grace closes at {window.closes_at.isoformat()}: "
                       "records may still arrive")

    result = Result.from_json({
        "flow": flow.name,
        "window": window.as_json(),
        "bucket_seconds": int(flow.bucket.total_seconds()),
        "grace_seconds": int(flow.grace.total_seconds()),
        "status": "ok",
        "tiers": tiers,
        "hops": hops,
        "replays": replays,
        "replays_consistent": consistent,
        "findings": findings,
        "reasons": reasons,
    }, "the reconcile step's aggregates")
    result.status = decide_status(result.findings, result.reasons)
    return result
