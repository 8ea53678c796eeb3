"""Snapshots, taken and read back: the flight recorder's side of the schedule and of a run.

`take_snapshots` runs every few minutes (the snapshots DAG, `kafka-recon snapshot`): each flow's
Flume counters and each of its topics' partitions and consumer groups go into the snapshot
store. `flight_over` is what a run reads back: each topic's timeline around its window, the
causes' evidence.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from kafka_recon.cluster import recorder
from kafka_recon.cluster.mirror import mirror_commits
from kafka_recon.config import Flow, FlumeTier
from kafka_recon.errors import ReconError, one_line
from kafka_recon.runfiles.flight import ConnectorTimeline, Flight, Timeline
from kafka_recon.settings import snapshot_retention_days
from kafka_recon.sources import flume
from kafka_recon.sources.kafka_client import endpoint
from kafka_recon.stores import snapshots as store
from kafka_recon.window import Window, iso_us, iso_z


def flight_over(flow: Flow, window: Window) -> Flight:
    """What the flight recorder kept of each of the flow's topics around the window, by tier
    name (read-only: a topic nobody snapshotted gets an empty timeline, and its causes say the
    evidence was missing)."""
    tiers = flow.kafka_tiers
    if not store.exists(store.snapshots_url()):
        return Flight(topics={t.name: Timeline() for t in tiers})
    eng = store.connect()
    # each topic over its own window: its grace may be longer than the flow's
    return Flight(topics={t.name: recorder.timeline(
        eng, flow.name, recorder.key_of(flow, t), window.start,
        replace(window, grace=flow.grace_of(t)).closes_at) for t in tiers},
        connectors={tier: ConnectorTimeline.model_validate(recorder.connector_timeline(
            eng, flow.name, tier, c.name, window.start, window.closes_at))
            for tier, c in flow.connectors.items()})


def take_flume(eng: Engine, flow: Flow, now: datetime) -> list[dict[str, Any]]:
    """One snapshot of every Flume tier of the flow, kept in the store."""
    taken = []
    for tier in flow.tiers:
        if isinstance(tier, FlumeTier):
            snap, raw = flume.read_tier(tier, now)
            # to the microsecond: a snapshot stored a second early would claim counts it had
            # not seen
            store.keep_flume(eng, flow.name, tier.name, iso_us(now), snap, raw)
            taken.append({"flow": flow.name, "tier": tier.name, "taken_at": iso_z(now),
                          "accepted": snap.source_accepted, "drained": snap.sink_drained})
    return taken


def take_snapshots(flows: dict[str, Flow], where: Path | str | None = None
                   ) -> tuple[list[dict[str, Any]], list[str]]:
    """One snapshot of each flow's Flume counters and of each of its topics' partitions and
    groups (the flight recorder), kept in the snapshot store (`where`, else the settings');
    snapshots past the retention are dropped. Returns what was taken and, per topic that could
    not be read, one line why: one unreachable cluster does not stop the other topics'
    snapshots."""
    now = datetime.now(UTC)
    taken: list[dict[str, Any]] = []
    errors: list[str] = []
    eng = store.connect(where)
    for name, flow in flows.items():
        try:
            taken += take_flume(eng, flow, now)
        except ReconError as exc:
            errors.append(f"flow '{name}': {one_line(exc)}")
        if flow.connectors:  # a Connect cluster that does not answer is kept as such
            try:
                taken += recorder.record_connectors(eng, flow, now)
            except ReconError as exc:
                errors.append(f"flow '{name}': connectors: {one_line(exc)}")
        for tier in flow.kafka_tiers:  # each topic on its own cluster; one failing
            try:                           # leaves the others snapshotted
                taken.append(recorder.record(eng, name, tier.topic, endpoint(tier),
                                             tier.consumer_groups, now,
                                             progress=mirror_commits(flow, tier),
                                             key=recorder.key_of(flow, tier)))
            except ReconError as exc:
                errors.append(f"flow '{name}': topic '{tier.topic}': {one_line(exc)}")
    recorder.forget(eng, now - timedelta(days=snapshot_retention_days()))
    return taken, errors
