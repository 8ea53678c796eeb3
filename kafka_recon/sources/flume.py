"""Flume tiers: counts from an agent's HTTP JSON metrics, snapshotted on a schedule.

Flume's counters are cumulative since the agent started (`StartTime`), so a window's count is
the growth of a counter between the snapshots that bracket it. `kafka-recon snapshot` takes one
snapshot of every Flume tier and keeps it in the snapshot store (kafka_recon.stores.snapshots);
Airflow runs it every few minutes. A restarted agent (a new StartTime, counters back to zero) is
not negative traffic: across a restart the growth is the new process's count since it started.

A Flume tier is counted at two points, its source (events accepted) and its sink (events
drained to Kafka), so a loss inside the agent, such as a memory channel lost with the process,
shows as a hop of its own, before the topic.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from kafka_recon.config import Flow, FlumeTier
from kafka_recon.errors import FlumeError
from kafka_recon.runfiles.stage import StagedPoint
from kafka_recon.window import Window, iso_z

TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Snapshot:
    taken_at: datetime
    source_start: int
    source_accepted: int
    sink_start: int
    sink_drained: int


def fetch_metrics(tier: FlumeTier) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(tier.metrics_url, timeout=TIMEOUT_S) as resp:  # noqa: S310
            body = resp.read()
    except (urllib.error.URLError, OSError) as exc:
        raise FlumeError(f"tier '{tier.name}': Flume metrics at {tier.metrics_url} cannot be "
                         f"read: {getattr(exc, 'reason', exc)}") from exc
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise FlumeError(f"tier '{tier.name}': {tier.metrics_url} did not answer JSON") from exc
    if not isinstance(data, dict):
        raise FlumeError(f"tier '{tier.name}': {tier.metrics_url} answered {type(data).__name__}"
                         ", expected Flume's JSON object of components")
    return data


def parse_metrics(tier: FlumeTier, data: dict[str, Any], taken_at: datetime) -> Snapshot:
    def counter(component: str, name: str) -> int:
        block = data.get(component)
        if not isinstance(block, dict) or name not in block:
            known = ", ".join(sorted(data)) or "none"
            raise FlumeError(f"tier '{tier.name}': {component}.{name} missing from "
                             f"{tier.metrics_url} (components: {known})")
        return int(block[name])

    src, snk = f"SOURCE.{tier.source}", f"SINK.{tier.sink}"
    return Snapshot(taken_at, counter(src, "StartTime"), counter(src, "EventAcceptedCount"),
                    counter(snk, "StartTime"), counter(snk, "EventDrainSuccessCount"))


def read_tier(tier: FlumeTier, now: datetime) -> tuple[Snapshot, str]:
    """One snapshot of a tier's counters now, and the agent's metrics as read (kept beside it)."""
    data = fetch_metrics(tier)
    return parse_metrics(tier, data, now), json.dumps(data)


def interval_growth(a: Snapshot, b: Snapshot, value: str, start_field: str
                    ) -> tuple[int, bool]:
    """What a cumulative counter grew by between two consecutive snapshots, and whether the
    agent restarted between them (then the new process counted `b` since it started)."""
    va, vb = getattr(a, value), getattr(b, value)
    if getattr(b, start_field) == getattr(a, start_field) and vb >= va:
        return vb - va, False
    return vb, True


def growth(snaps: list[Snapshot], value: str, start_field: str) -> tuple[int, int]:
    """Growth of a cumulative counter along consecutive snapshots, and the restarts seen."""
    steps = [interval_growth(a, b, value, start_field)
             for a, b in zip(snaps, snaps[1:], strict=False)]
    return sum(n for n, _ in steps), sum(r for _, r in steps)


def bracket(snaps: list[Snapshot], lo: datetime, hi: datetime) -> list[Snapshot] | None:
    """The snapshots from the last one at or before lo to the first at or after hi."""
    before = [s for s in snaps if s.taken_at <= lo]
    after = [s for s in snaps if s.taken_at >= hi]
    if not before or not after:
        return None
    return [s for s in snaps if before[-1].taken_at <= s.taken_at <= after[0].taken_at]


def stage_flume_tier(flow: Flow, tier: FlumeTier, window: Window,
                     snaps: list[Snapshot]) -> list[StagedPoint]:
    """Two count-only points (source, sink) with counts per bucket, or reasons why not.

    Each interval between two consecutive snapshots, (a, b], counts once, in the bucket (and
    window) in which it ends: b is the first snapshot to have seen its events. So buckets never
    overlap, a window's count is the counters' growth from the last snapshot at or before its
    start to the last one at or before its end, and consecutive windows add up to the counters'
    growth. A window
    needs a snapshot at or before its start and one at or after its end, else it is
    inconclusive.
    """
    chain = bracket(snaps, window.start, window.end)
    points = []
    for point, value, start_field in (("source", "source_accepted", "source_start"),
                                      ("sink", "sink_drained", "sink_start")):
        buckets = {iso_z(t): 0 for t in bucket_starts(window, flow.bucket)}
        reasons: list[str] = []
        restarts = 0
        if chain is None:
            reasons.append(f"tier '{tier.name}': no Flume snapshot brackets "
                           f"{iso_z(window.start)} - {iso_z(window.end)} (run `kafka-recon "
                           "snapshot` on a schedule)")
        else:
            for a, b in zip(chain, chain[1:], strict=False):
                # the events of (a, b] arrived by b: an interval ending at the window's start
                # is the previous window's, one ending at its end is this one's
                if not window.start < b.taken_at <= window.end:
                    continue
                n, restarted = interval_growth(a, b, value, start_field)
                steps = -((window.start - b.taken_at) // flow.bucket) - 1  # ceil, minus one
                buckets[iso_z(window.start + steps * flow.bucket)] += n
                restarts += restarted
        points.append(StagedPoint(name=f"{tier.name}.{point}", kind="counts",
                                  count=sum(buckets.values()), buckets=buckets,
                                  restarts=restarts, reasons=reasons))
    return points


def bucket_starts(window: Window, bucket: timedelta) -> list[datetime]:
    out, t = [], window.start
    while t < window.end:
        out.append(t)
        t += bucket
    return out
