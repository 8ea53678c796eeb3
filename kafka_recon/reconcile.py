"""Step 3, reconcile: tier counts and replays to hops, findings and a status (DESIGN.md, Result).

This is the count-level reconciliation of the walking skeleton; it is a pure function of its
inputs, so the same answer comes from Airflow, the command line and the tests.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kafka_recon.config import Flow
from kafka_recon.window import Window


def _replays_consistent(replays: list[dict[str, Any]]) -> bool:
    keys = {(r["count"], r["distinct"], r["fingerprint"]) for r in replays}
    return len(keys) <= 1


def reconcile_counts(flow: Flow, window: Window, tiers: list[dict[str, Any]],
                     topic: dict[str, Any], now: datetime | None = None) -> dict[str, Any]:
    """Build the result document.

    `tiers` holds {"name", "count", "distinct"} for every non-topic tier, `topic` is what the
    replay job wrote (its first replay stands for the topic; all replays must agree).
    """
    replays = topic["replays"]
    by_name = {t["name"]: t for t in tiers}
    first = replays[0]
    by_name[topic["tier"]] = {"name": topic["tier"], "count": first["count"],
                              "distinct": first["distinct"],
                              "unidentifiable": first.get("unidentifiable", 0),
                              "estimate": topic.get("estimate")}
    ordered = [by_name[t.name] for t in flow.tiers]

    hops, findings, reasons = [], [], []
    for up, down in zip(ordered, ordered[1:], strict=False):
        side = flow.side_of(up["name"])
        dup_up = up["count"] - up["distinct"]
        dup_down = down["count"] - down["distinct"]
        hop = {
            "from": up["name"], "to": down["name"], "side": side,
            "expected": up["distinct"], "observed": down["distinct"],
            "missing": max(0, up["distinct"] - down["distinct"]),
            "unexpected": max(0, down["distinct"] - up["distinct"]),
            # a duplicate belongs to the tier where it first appears
            "duplicate": max(0, dup_down - dup_up),
            "missing_ids": None,
        }
        hops.append(hop)
        name = f"{up['name']}->{down['name']}"
        for kind, key, tol in (("loss", "missing", flow.tolerance.loss),
                               ("duplicate", "duplicate", flow.tolerance.duplicate),
                               ("unexpected", "unexpected", 0)):
            if hop[key] > 0:
                findings.append({"kind": kind, "side": side, "hop": name, "count": hop[key],
                                 "ids": None, "within_tolerance": hop[key] <= tol})

    unidentifiable = by_name[topic["tier"]]["unidentifiable"]
    if unidentifiable:
        findings.append({"kind": "unidentifiable", "side": "write", "hop": topic["tier"],
                         "count": unidentifiable, "ids": None, "within_tolerance": False})
    consistent = _replays_consistent(replays)
    if not consistent:
        findings.append({"kind": "replay_unstable", "side": "write", "hop": topic["tier"],
                         "count": len(replays), "ids": None, "within_tolerance": False})
        reasons.append("replays of the same window disagree: the topic changed while it was read")
    if not window.is_closed(now or datetime.now(UTC)):
        reasons.append(f"the window plus grace closes at {window.closes_at.isoformat()}: "
                       "records may still arrive")

    if reasons:
        status = "inconclusive"
    elif any(not f["within_tolerance"] for f in findings):
        status = "findings"
    else:
        status = "ok"
    return {
        "flow": flow.name,
        "window": window.as_json(),
        "status": status,
        "tiers": ordered,
        "hops": hops,
        "replays": replays,
        "replays_consistent": consistent,
        "findings": findings,
        "reasons": reasons,
    }


def verdict(result: dict[str, Any]) -> str:
    """One line a person reads first: the status and, for each finding, side and count."""
    head = f"{result['flow']} {result['window']['start']}..{result['window']['end']}: " \
           f"{result['status'].upper()}"
    parts = [f"{f['count']} record(s) {_kind_words(f['kind'])} on the {f['side']} side "
             f"({f['hop']})" for f in result["findings"]]
    parts += result["reasons"]
    return head + (" - " + "; ".join(parts) if parts else " - every record accounted for")


def _kind_words(kind: str) -> str:
    return {"loss": "lost", "duplicate": "duplicated", "unexpected": "unexpected",
            "unidentifiable": "unidentifiable", "replay_unstable": "in unstable replays"
            }.get(kind, kind)
