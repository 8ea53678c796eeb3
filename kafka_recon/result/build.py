"""Findings, reasons and status from the reconcile step's aggregates (DESIGN.md, "Result").

The Spark step computes per-hop, per-bucket numbers and writes the id files; this module turns
those numbers into the typed result (`kafka_recon.result.model`). It is pure: the same inputs
give the same answer under Airflow, from the command line and in the tests.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from kafka_recon.config import Flow
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


def retention_reasons(flow: Flow, window: Window, topic: dict[str, Any]
                      ) -> tuple[list[str], list[dict[str, Any]]]:
    """Reasons the topic's window is incomplete, and consume-side losses to retention."""
    reasons: list[str] = []
    findings: list[dict[str, Any]] = []
    tier = flow.topic_tier
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
    for group, lost in sorted(deleted_before_consumed(ranges, committed).items()):
        findings.append({"kind": "loss", "side": "consume", "hop": f"{tier.name}->{after}",
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
    write_hop = f"{split['from']}->{flow.topic_tier.name}"
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
                       f"'{flow.topic_tier.topic}' were deleted by retention, not lost on the "
                       f"write side: {consumed} had been consumed into '{split['to']}', "
                       f"{unread} never were")
    return [f for f in findings if f not in write] + retention


def attach_causes(findings: list[dict[str, Any]], flow: Flow, aggregates: dict[str, Any],
                  topic: dict[str, Any], audit: list[dict[str, Any]],
                  flight: dict[str, Any] | None = None) -> None:
    """Each loss, duplicate and unexpected finding gets its probable cause (result.causes)."""
    hops = {f"{h['from']}->{h['to']}": h for h in aggregates["hops"]}
    ev = Evidence(
        topic=flow.topic_tier.name,
        committed={g: {int(p): off for p, off in offs.items()}
                   for g, offs in topic.get("committed", {}).items()},
        spans=next((t.get("partitions") or {} for t in aggregates["tiers"]
                    if t["name"] == flow.topic_tier.name), {}),
        audit=audit, flight=flight or {},
        restarts={t["name"]: int(t["restarts"]) for t in aggregates["tiers"]
                  if "restarts" in t})
    for f in findings:
        found = classify(f, hops.get(f["hop"]), ev)
        if found is not None:
            f["cause"] = found


def build_result(flow: Flow, window: Window, aggregates: dict[str, Any], topic: dict[str, Any],
                 stage_reasons: list[str] | None = None, now: datetime | None = None,
                 out: str | None = None, audit: list[dict[str, Any]] | None = None,
                 flight: dict[str, Any] | None = None) -> Result:
    replays = [{k: r[k] for k in ("group", "read", "count", "distinct", "unidentifiable",
                                  "fingerprint", "out_of_order") if k in r}
               for r in topic["replays"]]
    names = [p.name for p in flow.points]
    topic_at = names.index(flow.topic_tier.name)
    tiers, hops, findings = [], [], []
    reasons = list(stage_reasons or [])

    for t in aggregates["tiers"]:
        tier = {k: t.get(k) for k in ("name", "count", "distinct", "unidentifiable")}
        tier["buckets"] = dict(sorted((t.get("buckets") or {}).items()))  # chart and history
        if t["name"] == flow.topic_tier.name:
            tier["estimate"] = topic.get("estimate")
            tier["late"] = t.get("late", 0)
        tiers.append(tier)
        side = "write" if names.index(t["name"]) <= topic_at else "consume"
        if t.get("unidentifiable"):
            findings.append({"kind": "unidentifiable", "side": side, "hop": t["name"],
                             "count": t["unidentifiable"],
                             "ids": _rel(t.get("unidentifiable_file"), out),
                             "buckets": _nonzero(t.get("unidentifiable_buckets", {})),
                             "within_tolerance": False})
        if t.get("late"):
            prev = names[names.index(t["name"]) - 1] if names.index(t["name"]) else t["name"]
            findings.append({"kind": "late", "side": "write", "hop": f"{prev}->{t['name']}",
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
        if h.get("ids_between"):  # a counted loss whose ids the id tiers around it name
            hop["ids_between"] = h["ids_between"]
        hops.append(hop)
        name = f"{h['from']}->{h['to']}"
        for kind, key, tol in (("loss", "missing", flow.tolerance.loss),
                               ("duplicate", "duplicate", flow.tolerance.duplicate),
                               ("unexpected", "unexpected", 0)):
            if h[key] > 0:
                findings.append({"kind": kind, "side": h["side"], "hop": name, "count": h[key],
                                 "ids": hop[f"{key}_ids"],
                                 "buckets": _nonzero(h["buckets"].get(key, {})),
                                 "within_tolerance": h[key] <= tol})

    more_reasons, retention_findings = retention_reasons(flow, window, topic)
    reasons += more_reasons
    findings = explain_by_retention(findings, retention_findings, aggregates.get("retention"),
                                    flow, out, reasons)
    attach_causes(findings, flow, aggregates, topic, audit or [], flight)
    disorder = max((r.get("out_of_order") or 0 for r in topic["replays"]), default=0)
    if disorder:
        reasons.append(
            f"{disorder} record(s) between the offsets replayed for the window carry Kafka "
            f"timestamps outside it by more than the flow's disorder margin "
            f"({topic.get('disorder_seconds', 0)}s): the topic's timestamps are out of order, "
            f"so records of the "
            f"window may also lie outside the offsets found by timestamp")
    consistent = replays_consistent(topic["replays"])
    if not consistent:
        findings.append({"kind": "replay_unstable", "side": "write", "hop": flow.topic_tier.name,
                         "count": len(replays), "ids": None, "buckets": [],
                         "within_tolerance": False})
        reasons.append("replays of the same window disagree: the topic changed while it was "
                       "read (retention, truncation after an unclean election)")
    for a in audit or []:
        # what will be lost next, and why: never the loss verdict itself
        findings.append({**a, "hop": flow.topic_tier.name, "count": 1, "ids": None,
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
