"""The one way tests build flows and results: through the same models the product uses.

`result(...)` validates everything through `kafka_recon.result.model.Result`, so a test cannot
build a shape the product would never write; the status follows from the findings and reasons
as in the product unless a test says otherwise.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kafka_recon.config import Flow, load_flow
from kafka_recon.result.model import Bucket, Finding, Hop, Replay, Result, Tier, decide_status
from kafka_recon.runfiles.aggregates import Aggregates
from kafka_recon.runfiles.flight import Flight
from kafka_recon.runfiles.replays import Replays

FLOWS = Path(__file__).parent / "data" / "flows.yaml"  # tests' own flows, never config/
DAY = datetime(2026, 11, 20, tzinfo=UTC)


def flow(name: str = "orders") -> Flow:
    return load_flow(FLOWS, name)


def iso(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def hours(start: datetime = DAY, n: int = 24) -> list[str]:
    return [iso(start + timedelta(hours=h)) for h in range(n)]


def tier(name: str, count: int, **kw: Any) -> Tier:
    kw.setdefault("distinct", count)
    return Tier(name=name, count=count, **kw)


def hop(a: str, b: str, side: str, expected: int, observed: int, missing: int = 0,
        unexpected: int = 0, duplicate: int = 0, buckets: list[dict[str, Any]] | None = None,
        **kw: Any) -> Hop:
    return Hop.model_validate({
        "from": a, "to": b, "side": side, "exact": kw.pop("exact", True),
        "expected": expected, "observed": observed, "missing": missing,
        "unexpected": unexpected, "duplicate": duplicate,
        "buckets": [Bucket(**row) for row in buckets or []], **kw})


def finding(kind: str, side: str, at: str, count: int, **kw: Any) -> Finding:
    within = kw.pop("within_tolerance", kind in ("late", "config_risk", "health"))
    return Finding(kind=kind, side=side, hop=at, count=count, within_tolerance=within,
                   **kw)


def replay(group: str, count: int, fingerprint: str = "1", **kw: Any) -> Replay:
    kw.setdefault("distinct", count)
    return Replay(group=group, count=count, fingerprint=fingerprint, **kw)


def result(flow: str = "orders", start: datetime = DAY, days: int = 1, *,
           tiers: list[Tier] | None = None, hops: list[Hop] | None = None,
           findings: list[Finding] | None = None, replays: list[Replay] | None = None,
           reasons: list[str] | None = None, status: str | None = None,
           bucket_seconds: int | None = 3600, **kw: Any) -> Result:
    findings = findings or []
    reasons = reasons or []
    return Result.model_validate({
        "flow": flow, "window": {"start": iso(start), "end": iso(start + timedelta(days=days))},
        "bucket_seconds": bucket_seconds, "grace_seconds": kw.pop("grace_seconds", 600),
        "status": status or decide_status(findings, reasons),
        "tiers": tiers or [], "hops": hops or [], "replays": replays or [],
        "replays_consistent": kw.pop("replays_consistent", True),
        "findings": findings, "reasons": reasons, **kw})


def aggregates(data: dict[str, Any]) -> Aggregates:
    """reconcile.json from a test's crafted dict: a tier needs only its name and counts, a
    hop its counts (an id tier, a SQL tier, unless said)."""
    return Aggregates.model_validate({
        **data, "tiers": [{"type": "sql", "exact": True, **t} for t in data.get("tiers", [])]})


def replays(data: dict[str, Any]) -> Replays:
    """replays.json from a test's crafted dict: a topic needs only its tier and replays."""
    return Replays.model_validate({"topics": [
        {"offsets": [], "read_offsets": [], "disorder_seconds": 0, "estimate": 0,
         "committed": {}, "grace_seconds": 0, **t,
         "replays": [{"read": r["count"], "distinct": r["count"], "unidentifiable": 0,
                      "out_of_order": 0, **r} for r in t.get("replays", [])]}
        for t in data["topics"]]})


def build_from_json(flow: Flow, window: Any, aggregated: dict[str, Any],
                    replayed: dict[str, Any], **kw: Any) -> Result:
    """build_result on a test's crafted reconcile.json and replays.json (and flight.json)."""
    from kafka_recon.result.build import build_result

    if isinstance(kw.get("flight"), dict):
        kw["flight"] = Flight.model_validate(kw["flight"])
    return build_result(flow, window, aggregates(aggregated), replays(replayed), **kw)


def validate_from_json(result: Result, folder: Any, tolerance: Any,
                       volume: dict[str, Any] | None = None, hop_tolerance: Any = None
                       ) -> dict[str, Any]:
    """validate_result on a test's crafted volume band; validation.json's JSON form."""
    from kafka_recon.outputs.validate import validate_result
    from kafka_recon.runfiles.outcomes import Volume

    return validate_result(result, folder, tolerance,
                           Volume.model_validate(volume) if volume else None,
                           hop_tolerance).as_json()
