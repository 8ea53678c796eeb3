"""`result.json` as types: one set of models produces and reads it (DESIGN.md, "Result").

The JSON is what earlier versions wrote, with `schema_version` first (a result without one is
version 0, read as version 1: nothing else changed). Fields that only some results carry (a
finding's `cause`, the audit's `rule`, the topic tier's `estimate`) are left out when absent.
`kind` and `side` are closed sets, and `KINDS` is the one table of what each kind means and how
it is said.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_serializer

from kafka_recon.runfiles.base import Part, RunFile, Side

Status = Literal["ok", "findings", "inconclusive"]
Kind = Literal["loss", "duplicate", "unexpected", "late", "replay_unstable", "unidentifiable",
               "config_risk", "health"]


@dataclass(frozen=True)
class KindWords:
    short: str        # the verdict line and the mail: "12 record(s) lost on the consume side"
    sentence: str     # the report's first sentences: "12 records lost on the consume side ..."
    failure: bool     # counts against the verdict when outside tolerance
    audit: bool = False  # a configuration or health risk: what will be lost next, not a loss


KINDS: dict[str, KindWords] = {
    "loss": KindWords("lost", "lost", True),
    "duplicate": KindWords("duplicated", "duplicated", True),
    "unexpected": KindWords("unexpected", "found downstream with no upstream record", True),
    "unidentifiable": KindWords("unidentifiable", "without a readable id", True),
    "replay_unstable": KindWords("in unstable replays",
                                 "read differently by replays of the same window", True),
    "late": KindWords("late (inside grace)", "late (arrived inside grace, not lost)", False),
    "config_risk": KindWords("at configuration risk", "at configuration risk", False, True),
    "health": KindWords("at health risk", "at health risk", False, True),
}
AUDIT_KINDS = tuple(k for k, w in KINDS.items() if w.audit)


class _Model(Part):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, validate_assignment=True)

    # fields written only when set (None means "this result does not carry it")
    _optional: frozenset[str] = frozenset()

    @model_serializer(mode="wrap")
    def _drop_absent(self, handler: Any) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name in self._optional:
            key = type(self).model_fields[name].alias or name
            if data.get(key) is None:
                data.pop(key, None)
        return data

    def as_json(self) -> dict[str, Any]:
        """The contract's JSON form (aliases, absent fields left out)."""
        return self.model_dump(by_alias=True, mode="json")


class Bucket(_Model):
    bucket: str
    expected: int = 0
    observed: int = 0
    missing: int = 0
    unexpected: int = 0
    duplicate: int = 0


class Tier(_Model):
    _optional = frozenset({"estimate", "late", "where"})
    name: str
    count: int | None
    distinct: int | None = None
    unidentifiable: int | None = None
    buckets: dict[str, int] = {}
    estimate: int | None = None  # the topic only: offsets between the timestamps
    late: int | None = None      # the topic only
    where: str | None = None  # the tier's place from the flow config: a topic's cluster, ...


class Hop(_Model):
    _optional = frozenset({"ids_between", "filtered", "filtered_ids"})
    from_: str = Field(alias="from")
    to: str
    side: Side
    exact: bool
    expected: int | None
    observed: int | None
    missing: int
    unexpected: int
    duplicate: int
    missing_ids: str | None = None
    unexpected_ids: str | None = None
    duplicate_ids: str | None = None
    buckets: list[Bucket] = []
    ids_between: list[str] | None = None
    # a process hop with declared drops: the ids the processor filtered out on purpose (every
    # record of theirs a declared drop, none after it); not in `expected`, never loss
    filtered: int | None = None
    filtered_ids: str | None = None

    @property
    def name(self) -> str:
        return f"{self.from_}->{self.to}"


class Replay(_Model):
    _optional = frozenset({"tier", "read", "unidentifiable", "out_of_order"})
    tier: str | None = None  # which topic, when the flow has several
    group: str
    read: int | None = None
    count: int
    distinct: int
    unidentifiable: int | None = None
    fingerprint: str
    out_of_order: int | None = None


class Cause(_Model):
    """Why a finding happened, as far as the evidence goes (kafka_recon.result.causes)."""
    code: str
    summary: str
    confidence: Literal["likely", "possible", "unknown"]
    evidence: list[str] = []
    seed: str
    fix: str


class Finding(_Model):
    _optional = frozenset({"rule", "severity", "seed", "topic", "where", "observed",
                           "recommended", "why", "fix", "blocking", "cause", "group",
                           "offsets", "allowed"})
    kind: Kind
    # the audit's fields (config_risk, health)
    rule: str | None = None
    side: Side
    severity: Literal["high", "medium", "low"] | None = None
    seed: str | None = None
    topic: str | None = None
    where: str | None = None
    observed: Any = None
    recommended: Any = None
    why: str | None = None
    fix: str | None = None
    blocking: bool | None = None
    # every finding
    hop: str
    count: int
    ids: str | None = None
    # a Cause; the text "retention" in results written before causes were objects
    cause: Cause | str | None = None
    group: str | None = None
    buckets: list[str] = []
    within_tolerance: bool = False
    # records of this kind the hop's tolerance allows (a count, or its percentage of the
    # hop's expected records); None: a kind no tolerance applies to
    allowed: int | None = None
    offsets: int | None = None  # a loss to retention: offsets deleted unread

    @property
    def words(self) -> KindWords:
        return KINDS[self.kind]

    def short(self) -> str:
        """The finding in the verdict's words: count, kind, side and hop."""
        return f"{self.count} record(s) {self.words.short} on the {self.side} side ({self.hop})"

    @property
    def is_audit(self) -> bool:
        return self.words.audit

    @property
    def fails(self) -> bool:
        """Counts against the verdict: a failure kind outside the flow's tolerance."""
        return self.words.failure and not self.within_tolerance


class WindowJson(_Model):
    start: str
    end: str


class Result(_Model, RunFile):
    """result.json: one run's answer for one flow and window: every tier's and hop's counts,
    the replays, the findings (each with its side, hop, ids and cause) and, when the run could
    not see everything, the reasons it is inconclusive."""

    FILE = "result"
    _optional = frozenset({"bucket_seconds", "grace_seconds"})
    flow: str
    window: WindowJson
    bucket_seconds: int | None = None
    grace_seconds: int | None = None
    status: Status
    tiers: list[Tier] = []
    hops: list[Hop] = []
    replays: list[Replay] = []
    replays_consistent: bool = False
    findings: list[Finding] = []
    reasons: list[str] = []

    # ------------------------------------------------------------------ reading
    @classmethod
    def from_json(cls, data: Any, where: str = "result.json") -> Result:
        return cls.parse(data, where)

    # ------------------------------------------------------------------ what it says
    @property
    def failures(self) -> list[Finding]:
        """Findings that count against the loss verdict (outside tolerance, not audit, not
        late)."""
        return [f for f in self.findings if f.fails]

    @property
    def record_findings(self) -> list[Finding]:
        """Findings about records (loss, duplicate, ..., late), not the audit's risks."""
        return [f for f in self.findings if not f.is_audit]

    @property
    def risks(self) -> list[Finding]:
        return [f for f in self.findings if f.is_audit]

    def verdict(self) -> str:
        """One line a person reads first: the status and, for each finding, side and count."""
        head = f"{self.flow} {self.window.start}..{self.window.end}: {self.status.upper()}"
        parts = [f.short() for f in self.record_findings]
        parts += self.reasons
        if not parts:
            parts.append("every record accounted for")
        if self.risks:
            parts.append(f"{len(self.risks)} configuration or health risk(s), "
                         f"{sum(f.severity == 'high' for f in self.risks)} high")
        return head + " - " + "; ".join(parts)

    def subject(self) -> str:
        """The mail's subject line."""
        return (f"[kafka-recon] {self.flow} {self.window.start}..{self.window.end}: "
                f"{self.status.upper()}")


def decide_status(findings: list[Finding], reasons: list[str]) -> Status:
    if reasons:
        return "inconclusive"
    return "findings" if any(f.fails for f in findings) else "ok"


def inconclusive(flow: str, window: dict[str, str], reason: str, *,
                 bucket_seconds: int | None = None,
                 grace_seconds: int | None = None) -> Result:
    """A result that says only why the run could not see everything: owners still hear of it."""
    return Result(flow=flow, window=WindowJson(**window), bucket_seconds=bucket_seconds,
                  grace_seconds=grace_seconds, status="inconclusive", reasons=[reason])
