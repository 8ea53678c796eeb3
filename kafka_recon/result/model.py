"""`result.json` as types: one set of models produces and reads it (docs/design.md, "Result").

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
               "dead_lettered", "volume", "freshness", "config_risk", "health"]


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
    "dead_lettered": KindWords("dead-lettered", "routed to a dead-letter queue (not lost, "
                               "not loaded)", True),
    "volume": KindWords("outside the volume its history expects",
                        "outside the volume its history expects", True),
    "freshness": KindWords("stale (no newer record)", "without a newer record", True),
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
    """The bucket's start, ISO 8601 UTC."""
    expected: int = 0
    """Records the hop's upstream end had in the bucket."""
    observed: int = 0
    """Records its downstream end had."""
    missing: int = 0
    """Records of the bucket lost on the hop."""
    unexpected: int = 0
    """Records downstream in the bucket that the upstream end did not have."""
    duplicate: int = 0
    """Extra copies downstream in the bucket."""


class Tier(_Model):
    _optional = frozenset({"estimate", "late", "where", "as_of", "newest", "newest_arrival"})
    name: str
    """The counting point: a tier, or a Flume tier's `<tier>.source` / `<tier>.sink`."""
    count: int | None
    """Records counted in the window (null: the point could not be counted)."""
    distinct: int | None = None
    """Distinct ids among them (an id tier)."""
    unidentifiable: int | None = None
    """Records whose id or event time could not be read (counted, never dropped)."""
    buckets: dict[str, int] = {}
    """Records per bucket start."""
    estimate: int | None = None
    """The topic only: offsets between the window's timestamps, the quick estimate (never the
    verdict)."""
    late: int | None = None
    """The topic only: records that arrived inside grace."""
    where: str | None = None
    """The tier's place from the flow config: a topic and its cluster, a database without its
    password, a Flume agent's address, a table."""
    as_of: int | None = None
    """A table tier: the Iceberg snapshot id or Delta version read; the tier's `as_of` set to it
    reads the same state again."""
    newest: str | None = None
    """An id tier: the latest event time of its window records, ISO 8601 UTC (how fresh it
    is)."""
    newest_arrival: str | None = None
    """A topic: the latest Kafka (log-append or create) timestamp of its window records."""


class Hop(_Model):
    _optional = frozenset({"ids_between", "filtered", "filtered_ids", "dead_lettered",
                           "dead_lettered_ids", "dead_letter_topic"})
    from_: str = Field(alias="from")
    """The upstream counting point."""
    to: str
    """The downstream counting point."""
    side: Side
    """write, consume, replication or process."""
    exact: bool
    """Ids compared one by one (both ends id tiers), else counts per bucket."""
    expected: int | None
    """Records the upstream end had."""
    observed: int | None
    """Records the downstream end had."""
    missing: int
    """Records lost on the hop."""
    unexpected: int
    """Records downstream that the upstream end did not have."""
    duplicate: int
    """Extra copies downstream."""
    missing_ids: str | None = None
    """The run-folder path of the CSV of every missing id."""
    unexpected_ids: str | None = None
    """The CSV of every unexpected id."""
    duplicate_ids: str | None = None
    """The CSV of every duplicated id."""
    buckets: list[Bucket] = []
    """The hop's counts per bucket."""
    ids_between: list[str] | None = None
    """A counted hop whose loss the id tiers around it name exactly: those tiers."""
    filtered: int | None = None
    """A process hop with declared drops: records the processor filtered out on purpose (not in
    `expected`, never loss)."""
    filtered_ids: str | None = None
    """The CSV of the filtered ids."""
    dead_lettered: int | None = None
    """Into a sink connector with a dead-letter queue: records the connector routed to the
    queue (not in `missing`: not lost, not loaded)."""
    dead_lettered_ids: str | None = None
    """The CSV of the dead-lettered ids, each with its error and offsets."""
    dead_letter_topic: str | None = None
    """The dead-letter queue read."""

    @property
    def name(self) -> str:
        return f"{self.from_}->{self.to}"


class Replay(_Model):
    _optional = frozenset({"tier", "read", "unidentifiable", "out_of_order"})
    tier: str | None = None
    """Which topic, when the flow has several."""
    group: str
    """The replay's fresh consumer group (never committed)."""
    read: int | None = None
    """Records between the offsets read, the disorder margin included, any event time."""
    count: int
    """Records of the window the replay read."""
    distinct: int
    """Distinct ids among them."""
    unidentifiable: int | None = None
    """Records whose id or event time could not be read."""
    fingerprint: str
    """A digest of the ids read: replays that agree have the same one."""
    out_of_order: int | None = None
    """Records stamped more than the disorder margin outside the window (the run is
    inconclusive)."""


class Cause(_Model):
    """Why a finding happened, as far as the evidence goes (kafka_recon.result.causes)."""
    code: str
    """The mechanism, e.g. commit_ahead_of_processing, unclean_leader_election."""
    summary: str
    """One sentence for the report."""
    confidence: Literal["likely", "possible", "unknown"]
    """likely, possible or unknown."""
    evidence: list[str] = []
    """What the evidence showed, each a sentence."""
    seed: str
    """The source article that describes the mechanism."""
    fix: str
    """What to change so it does not happen again."""


class Finding(_Model):
    _optional = frozenset({"rule", "severity", "seed", "docs", "topic", "where", "observed",
                           "recommended", "why", "fix", "blocking", "cause", "group",
                           "offsets", "allowed", "band", "direction", "newest"})
    kind: Kind
    """loss, duplicate, unexpected, late, replay_unstable, unidentifiable, dead_lettered,
    volume, freshness, config_risk or health."""
    # the audit's fields (config_risk, health)
    rule: str | None = None
    """The audit's rule (config_risk, health)."""
    side: Side
    """Where along the flow: write, consume, replication or process."""
    severity: Literal["high", "medium", "low"] | None = None
    """The audit's severity: high, medium or low."""
    seed: str | None = None
    """The audit's source article."""
    docs: str | None = None
    """The documentation the audit's advice comes from (a web address)."""
    topic: str | None = None
    """The audit's topic."""
    where: str | None = None
    """The audit's place: the topic, a broker, a client."""
    observed: Any = None
    """The audit's observed setting."""
    recommended: Any = None
    """The audit's recommended setting."""
    why: str | None = None
    """Why the audit's rule matters."""
    fix: str | None = None
    """How to fix what the audit found."""
    blocking: bool | None = None
    """The audit's risk makes the window's count unreliable."""
    # every finding
    hop: str
    """The hop (`from->to`) or tier it is about."""
    count: int
    """Records of this kind."""
    ids: str | None = None
    """The run-folder path of the CSV of every id (never a sample)."""
    # the text "retention" in results written before causes were objects
    cause: Cause | str | None = None
    """Why it happened, as far as the evidence goes."""
    group: str | None = None
    """A loss to retention: the consumer group that had not read the records."""
    buckets: list[str] = []
    """The buckets it touches."""
    within_tolerance: bool = False
    """Inside the hop's tolerance: reported, not a failure."""
    allowed: int | None = None
    """Records of this kind the hop's tolerance allows (a count, or its percentage of the
    hop's expected records); null: a kind no tolerance applies to."""
    offsets: int | None = None
    """A loss to retention: offsets deleted unread."""
    # a volume finding's: `count` is the records its buckets held
    band: list[int] | None = None
    """A volume finding: the fewest and the most records its buckets were expected to hold
    together (their bands summed)."""
    direction: Literal["too few", "too many"] | None = None
    """A volume finding: which way it left its band."""
    newest: str | None = None
    """A freshness finding: the tier's latest record time in the window (when it stopped);
    null: the window holds no record of it at all."""

    @property
    def words(self) -> KindWords:
        return KINDS[self.kind]

    def short(self) -> str:
        """The finding in the verdict's words: count, kind, side and hop."""
        if self.kind == "freshness":
            return f"{self.hop} stale: no record after {self.newest or 'the window start'}"
        if self.kind == "volume" and self.band:
            return (f"{self.hop} held {self.count} record(s), {self.direction} for its "
                    f"history ({self.band[0]}-{self.band[1]})")
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
    """The window's start, ISO 8601 UTC (inclusive)."""
    end: str
    """The window's end, ISO 8601 UTC (exclusive)."""


class Result(_Model, RunFile):
    """result.json: one run's answer for one flow and window: every tier's and hop's counts,
    the replays, the findings (each with its side, hop, ids and cause) and, when the run could
    not see everything, the reasons it is inconclusive."""

    FILE = "result"
    _optional = frozenset({"run", "bucket_seconds", "grace_seconds"})
    flow: str
    """The flow's name."""
    window: WindowJson
    """The window reconciled."""
    bucket_seconds: int | None = None
    """The flow's bucket, in seconds."""
    grace_seconds: int | None = None
    """The flow's grace, in seconds."""
    status: Status
    """ok, findings, or inconclusive (the run could not see everything; never reported as ok)."""
    tiers: list[Tier] = []
    """Every counting point's counts, in flow order."""
    hops: list[Hop] = []
    """Every hop's comparison, in flow order."""
    replays: list[Replay] = []
    """Each replay of each topic."""
    replays_consistent: bool = False
    """The replays of every topic agreed."""
    findings: list[Finding] = []
    """Every problem found."""
    reasons: list[str] = []
    """Why the run is inconclusive, each a sentence naming what could not be seen."""

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
        """The mail's subject: status first, then the flow, what was found and the window, so
        that a phone's list shows the status and the count before it cuts the line
        ("FINDINGS orders: 100 lost, 2026-12-05")."""
        if self.status == "inconclusive":
            what = "could not see every record"
        elif self.status == "findings":
            counts: dict[str, int] = {}
            said: list[str] = []  # a tier's volume or freshness: no count of records to sum
            for f in self.record_findings:
                if f.fails and f.kind == "freshness":
                    said.append(f"{f.hop} stale")
                elif f.fails and f.kind == "volume":
                    said.append(f"{f.hop} {f.direction}")
                elif f.fails:
                    counts[f.words.short] = counts.get(f.words.short, 0) + f.count
            what = ", ".join([f"{n:,} {words}" for words, n in counts.items()]
                             + list(dict.fromkeys(said)))
        else:
            what = ("within tolerance" if any(f.words.failure for f in self.record_findings)
                    else "every record accounted for")
        return f"{self.status.upper()} {self.flow}: {what}, {window_label(self.window)}"


def window_label(window: WindowJson) -> str:
    """A window as a person names it, in UTC: a whole day by its date ("2026-12-05"), else
    its times ("2026-12-05 10:35-10:40 UTC", "2026-12-05 22:00 - 2026-12-06 02:00 UTC")."""
    from datetime import datetime, timedelta

    start = datetime.fromisoformat(window.start.replace("Z", "+00:00"))
    end = datetime.fromisoformat(window.end.replace("Z", "+00:00"))
    if start.time() == end.time() == datetime.min.time():
        days = (end - start).days
        return f"{start:%Y-%m-%d}" + ("" if days == 1 else
                                      f" - {end - timedelta(days=1):%Y-%m-%d}")
    if start.date() == end.date() or end == datetime.combine(start.date() + timedelta(1),
                                                              datetime.min.time(), end.tzinfo):
        return f"{start:%Y-%m-%d %H:%M}-{end:%H:%M} UTC"
    return f"{start:%Y-%m-%d %H:%M} - {end:%Y-%m-%d %H:%M} UTC"


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
