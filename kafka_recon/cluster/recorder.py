"""The flight recorder: the cluster's state around each of a flow's topics, snapshotted on a
schedule.

Kafka keeps no history of who led a partition, when its ISR shrank or which consumers held it,
yet those are what tell one write-side or consume-side loss mechanism from another. So every
few minutes (`recon_snapshots` in Airflow, or `kafka-recon snapshot`) the recorder keeps, for
every topic of each flow (each on its own cluster): each partition's leader, leader epoch,
replicas, ISR, log start and log end (the high watermark), and each production group's
committed offsets and members (client id, host, assigned partitions). Only metadata is read,
by the Admin API and an OffsetFetch that never joins the group: no client of the pipeline is
touched.

Snapshots are kept in the snapshot store (kafka_recon.stores.snapshots, beside the Flume
counters) for
`KAFKA_RECON_SNAPSHOT_RETENTION_DAYS`. `timeline()` turns a window's snapshots into events:
leader changes (clean or not), partitions offline, ISR shrinks, a high watermark moving back
(acknowledged records truncated), and the groups' members. `kafka_recon.result.causes` reads it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, delete, select
from sqlalchemy.exc import SQLAlchemyError

from kafka_recon.config import Flow, KafkaTier
from kafka_recon.runfiles.flight import Timeline
from kafka_recon.sources.kafka_client import KafkaEndpoint
from kafka_recon.stores import snapshots as store
from kafka_recon.stores.database import unreachable
from kafka_recon.window import iso_us, iso_z, parse_instant

# a window is covered when no two snapshots around it are further apart than this: three
# missed runs of a five-minute schedule
MAX_GAP = timedelta(minutes=15)
TIMEOUT_S = 10.0
P, G = store.partition_snapshot.c, store.group_snapshot.c


def connect(where: Path | str | None = None) -> Engine:
    """The snapshot store (a file, a URL, else the settings')."""
    return store.connect(where)


def _rows(eng: Engine, query: Any) -> list[Any]:
    try:
        with eng.connect() as con:
            return list(con.execute(query).all())
    except SQLAlchemyError as exc:
        raise unreachable(str(eng.url), exc) from exc


# ------------------------------------------------------------------ taking a snapshot
def read_partitions(ep: KafkaEndpoint, topic: str) -> list[dict[str, Any]]:
    """Each partition's leader (-1: none), replicas, ISR, and, from its leader, log start, log
    end and leader epoch; a partition whose leader does not answer keeps the error instead."""
    from confluent_kafka import KafkaException, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    from kafka_recon.sources.topic import Client, topic_metadata

    with Client(ep, "admin") as client:
        _, md = topic_metadata(client, topic, settle_s=TIMEOUT_S, leaderless=True)
        rows = {p.id: {"partition": p.id, "leader": int(p.leader),
                       "replicas": sorted(p.replicas), "isr": sorted(p.isrs),
                       "leader_epoch": None, "log_start": None, "log_end": None,
                       "error": p.error.str() if p.error else None}
                for p in md.partitions.values()}
        for spec, key in ((OffsetSpec.earliest(), "log_start"), (OffsetSpec.latest(), "log_end")):
            asked = {TopicPartition(topic, p): spec for p, r in rows.items() if r["leader"] >= 0}
            if not asked:
                break
            futures = client.handle.list_offsets(asked, request_timeout=TIMEOUT_S)
            for tp, fut in futures.items():
                try:
                    got = fut.result(TIMEOUT_S + 2)
                except (KafkaException, TimeoutError) as exc:
                    rows[tp.partition]["error"] = str(exc) or "no answer from the leader"
                    continue
                if got.offset < 0:  # OFFSET_INVALID while leadership moves: not an offset
                    rows[tp.partition]["error"] = f"{key} unknown (offset {got.offset})"
                    continue
                rows[tp.partition][key] = int(got.offset)
                if got.leader_epoch is not None and got.leader_epoch >= 0:
                    rows[tp.partition]["leader_epoch"] = int(got.leader_epoch)
    return [rows[p] for p in sorted(rows)]


def read_group(ep: KafkaEndpoint, topic: str, group: str, parts: list[int]) -> dict[str, Any]:
    """A production group's committed offsets on the topic and its members (client id, host,
    the topic's partitions assigned to each)."""
    from confluent_kafka import KafkaException

    from kafka_recon.sources.topic import NO_COMMIT, Client, group_committed

    out: dict[str, Any] = {"state": None, "committed": {}, "members": [], "error": None}
    try:
        out["committed"] = {str(tp.partition): tp.offset
                            for tp in group_committed(ep, topic, group, parts, ask_s=5.0)
                            if tp.offset != NO_COMMIT}
    except Exception as exc:  # noqa: BLE001 - kept as the snapshot's gap, not a crash
        out["error"] = f"committed offsets: {exc}"
    try:
        with Client(ep, "admin") as client:
            desc = client.handle.describe_consumer_groups(
                [group], request_timeout=TIMEOUT_S)[group].result(TIMEOUT_S + 2)
        out["state"] = str(getattr(desc.state, "name", desc.state))
        out["members"] = [
            {"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
             "partitions": sorted(tp.partition for tp in (m.assignment.topic_partitions
                                                         if m.assignment else [])
                                  if tp.topic == topic)}
            for m in desc.members]
    except (KafkaException, TimeoutError) as exc:
        out["error"] = ((out["error"] + "; ") if out["error"] else "") + f"members: {exc}"
    return out


def key_of(flow: Flow, tier: KafkaTier) -> str:
    """The name a topic's snapshots are kept under in the store: the topic's own, or, for a
    later tier whose topic an earlier tier of the flow already names (a mirror keeping topic
    names, on another cluster), `<topic>@<tier>`. The first topic keeps its plain name, so a
    store made when only the first topic was watched reads on."""
    earlier = [t.topic for t in flow.kafka_tiers[:flow.kafka_tiers.index(tier)]]
    return f"{tier.topic}@{tier.name}" if tier.topic in earlier else tier.topic


def record(eng: Engine, flow: str, topic: str, ep: KafkaEndpoint,
           groups: list[str], now: datetime | None = None,
           progress: dict[str, dict[int, int]] | None = None,
           key: str | None = None) -> dict[str, Any]:
    """One snapshot of the topic's partitions and groups, kept in the store under `key` (the
    topic's name unless `key_of` says otherwise). `progress`: the commits of readers that are
    no consumer group (a mirror's, `kafka_recon.cluster.mirror`), kept as groups without
    members."""
    now = now or datetime.now(UTC)
    taken = iso_us(now)
    parts = read_partitions(ep, topic)
    read = {group: read_group(ep, topic, group, [p["partition"] for p in parts])
            for group in groups}
    read.update({name: {"state": None, "committed": {str(p): o for p, o in offs.items()},
                        "members": [], "error": None}
                 for name, offs in (progress or {}).items()})
    # everything read first: the write lock is held for the inserts only, as other flows'
    # snapshot tasks and the Flume counters write to the same store
    kept = key or topic  # the store's name for the topic; reads above use the topic's own
    try:
        with eng.begin() as con:
            store.replace_rows(con, store.partition_snapshot, [{
                "flow": flow, "topic": kept, "taken_at": taken, "partition": p["partition"],
                "leader": p["leader"], "leader_epoch": p["leader_epoch"],
                "replicas": json.dumps(p["replicas"]), "isr": json.dumps(p["isr"]),
                "log_start": p["log_start"], "log_end": p["log_end"], "error": p["error"]}
                for p in parts])
            store.replace_rows(con, store.group_snapshot, [{
                "flow": flow, "topic": kept, "grp": group, "taken_at": taken,
                "state": g["state"], "committed": json.dumps(g["committed"]),
                "members": json.dumps(g["members"]), "error": g["error"]}
                for group, g in read.items()])
    except SQLAlchemyError as exc:
        raise unreachable(str(eng.url), exc) from exc
    return {"flow": flow, "topic": kept, "taken_at": iso_z(now), "partitions": len(parts),
            "groups": len(read)}


def forget(eng: Engine, older_than: datetime) -> int:
    """Drop snapshots older than the retention; returns the rows dropped."""
    cut = iso_us(older_than)
    try:
        with eng.begin() as con:
            return sum(con.execute(delete(t).where(t.c.taken_at < cut)).rowcount
                       for t in (store.partition_snapshot, store.group_snapshot,
                                 store.connector_snapshot))
    except SQLAlchemyError as exc:
        raise unreachable(str(eng.url), exc) from exc


# ------------------------------------------------------------------ reading a window back
@dataclass(frozen=True)
class PartitionState:
    at: datetime
    leader: int
    epoch: int | None
    isr: tuple[int, ...]
    log_end: int | None
    error: str | None

    @property
    def unavailable(self) -> bool:
        """No leader, or one whose log could not be read (dead, or no longer the leader)."""
        return self.leader < 0 or self.error is not None


def _between(a: datetime, b: datetime) -> list[str]:
    return [iso_z(a), iso_z(b)]


def partition_events(states: list[PartitionState], partition: int) -> list[dict[str, Any]]:
    """Leader changes, offline spells, ISR shrinks and truncations between consecutive
    snapshots of one partition, in time order.

    A leader change compares the new leader with the last snapshot that had one (a spell
    without a leader lies between them); it is clean when the new leader was in that
    snapshot's ISR. A spell offline is a leader of -1 or one whose log cannot be read."""
    events: list[dict[str, Any]] = []
    offline_since: PartitionState | None = None
    led: PartitionState | None = None  # the last snapshot with a leader
    for a, b in zip(states, states[1:], strict=False):
        led = a if a.leader >= 0 else led
        base = {"partition": partition, "between": _between(a.at, b.at)}
        if b.unavailable and not a.unavailable:
            offline_since = a
        if offline_since is not None and not b.unavailable:
            events.append({**base, "event": "offline",
                           "between": _between(offline_since.at, b.at),
                           "leader_before": offline_since.leader, "leader_after": b.leader})
            offline_since = None
        if led is not None and b.leader >= 0 and b.leader != led.leader:
            events.append({**base, "event": "leader_change", "between": _between(led.at, b.at),
                           "from": led.leader, "to": b.leader, "clean": b.leader in led.isr,
                           "isr_before": list(led.isr), "epochs": [led.epoch, b.epoch]})
        if offline_since is None and not a.unavailable and not b.unavailable \
                and b.leader == a.leader and a.epoch is not None and b.epoch is not None \
                and b.epoch > a.epoch:
            # the same leader, a newer epoch, and no snapshot in between saw why: it lost
            # leadership and won it back (offline for a while, or elsewhere and back)
            events.append({**base, "event": "leader_bounced", "leader": b.leader,
                           "epochs": [a.epoch, b.epoch]})
        if b.leader >= 0 and a.leader >= 0 and len(b.isr) < len(a.isr):
            events.append({**base, "event": "isr_shrink", "isr_before": list(a.isr),
                           "isr_after": list(b.isr)})
        if a.log_end is not None and b.log_end is not None and 0 <= b.log_end < a.log_end:
            events.append({**base, "event": "truncation", "log_end_before": a.log_end,
                           "log_end_after": b.log_end})
    if offline_since is not None:
        events.append({"partition": partition, "event": "offline",
                       "between": _between(offline_since.at, states[-1].at),
                       "leader_before": offline_since.leader, "leader_after": -1})
    return sorted(events, key=lambda e: (e["between"][0], e["event"]))


def timeline(con: Engine, flow: str, topic: str, start: datetime, end: datetime,
             margin: timedelta = MAX_GAP) -> Timeline:
    """The events the snapshots from `start - margin` to `end + margin` show; `covered` when
    snapshots bracket [start, end] with no gap above MAX_GAP between them."""
    lo, hi = iso_us(start - margin), iso_us(end + margin)
    rows = _rows(con, select(P.taken_at, P.partition, P.leader, P.leader_epoch, P.isr,
                             P.log_end, P.error)
                 .where(P.flow == flow, P.topic == topic, P.taken_at.between(lo, hi))
                 .order_by(P.taken_at, P.partition))
    by_part: dict[int, list[PartitionState]] = {}
    times: list[datetime] = []
    for taken, part, leader, epoch, isr, log_end, error in rows:
        at = parse_instant(taken, f"recorder snapshot of {flow}")
        if not times or times[-1] != at:
            times.append(at)
        by_part.setdefault(int(part), []).append(
            PartitionState(at, int(leader), epoch, tuple(json.loads(isr)), log_end, error))
    if not times:
        return Timeline()
    gaps = [(b - a).total_seconds() for a, b in zip(times, times[1:], strict=False)]
    inside = [t for t in times if start - MAX_GAP <= t <= end + MAX_GAP]
    events = [e for part, states in sorted(by_part.items())
              for e in partition_events(states, part)]
    events.sort(key=lambda e: (e["between"][0], e["partition"], e["event"]))
    return Timeline.model_validate({
        "snapshots": len(times), "first": iso_z(times[0]), "last": iso_z(times[-1]),
        "largest_gap_s": max(gaps) if gaps else None,
        "covered": bool(inside) and inside[0] <= start and inside[-1] >= end and all(
            g <= MAX_GAP.total_seconds() for g in gaps),
        "events": events, "members": group_members(con, flow, topic, lo, hi),
        "deleted_unread": deleted_unread(con, flow, topic, lo, hi)})


def deleted_unread(con: Engine, flow: str, topic: str, lo: str, hi: str) -> dict[str, int]:
    """Per group, the offsets retention deleted before the group read them, as the snapshots
    saw it: per partition the largest gap, at one snapshot, between the log start and the
    group's commit below it, summed over partitions. A reader that later jumps to the log
    start (a consumer resetting to `earliest`, a resumed mirror) commits past the gap, so
    the run's own reading of the commits no longer shows it; the snapshots still do."""
    starts = {(taken, int(part)): int(low) for taken, part, low in _rows(con, select(
        P.taken_at, P.partition, P.log_start).where(
        P.flow == flow, P.topic == topic, P.taken_at.between(lo, hi), P.log_start.is_not(None)))}
    gaps: dict[str, dict[int, int]] = {}
    for group, taken, committed in _rows(con, select(G.grp, G.taken_at, G.committed).where(
            G.flow == flow, G.topic == topic, G.taken_at.between(lo, hi))):
        for part, off in json.loads(committed or "{}").items():
            low = starts.get((taken, int(part)))
            if low is not None and 0 <= int(off) < low:
                mine = gaps.setdefault(group, {})
                mine[int(part)] = max(mine.get(int(part), 0), low - int(off))
    return {g: sum(parts.values()) for g, parts in sorted(gaps.items())}


def group_members(con: Engine, flow: str, topic: str, lo: str, hi: str
                  ) -> dict[str, list[dict[str, Any]]]:
    """Per group, each member seen with the topic's partitions it held, and when."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for group, taken, members in _rows(con, select(G.grp, G.taken_at, G.members).where(
            G.flow == flow, G.topic == topic, G.taken_at.between(lo, hi)).order_by(G.taken_at)):
        seen = out.setdefault(group, {})
        at = iso_z(parse_instant(taken, f"recorder snapshot of {flow}"))
        for m in json.loads(members or "[]"):
            entry = seen.setdefault(m["member_id"], {
                "member_id": m["member_id"], "client_id": m["client_id"], "host": m["host"],
                "partitions": [], "assignments": [], "first_seen": at, "last_seen": at})
            entry["partitions"] = sorted(set(entry["partitions"]) | set(m["partitions"]))
            # each distinct assignment it held: a rebalance changes what a member holds
            if m["partitions"] not in entry["assignments"]:
                entry["assignments"].append(m["partitions"])
            entry["last_seen"] = at
    return {g: sorted(ms.values(), key=lambda m: (m["first_seen"], m["member_id"]))
            for g, ms in out.items()}


# ------------------------------------------------------------------ Kafka Connect connectors
C = store.connector_snapshot.c


def record_connectors(eng: Engine, flow: Flow, now: datetime | None = None
                      ) -> list[dict[str, Any]]:
    """One snapshot of each connector the flow names (state, tasks, offsets), from its
    Connect cluster's REST API; a cluster that does not answer is kept as the snapshot's
    error."""
    from kafka_recon.sources.connect import snapshots

    now = now or datetime.now(UTC)
    taken = iso_us(now)
    snaps = snapshots(flow).connectors
    try:
        with eng.begin() as con:
            store.replace_rows(con, store.connector_snapshot, [{
                "flow": flow.name, "tier": s.tier, "taken_at": taken, "name": s.name,
                "state": s.state, "tasks": json.dumps([t.as_json() for t in s.tasks]),
                "offsets": json.dumps(s.offsets), "error": s.error} for s in snaps])
    except SQLAlchemyError as exc:
        raise unreachable(str(eng.url), exc) from exc
    return [{"flow": flow.name, "connector": s.name, "taken_at": iso_z(now),
             "state": s.state, "error": s.error} for s in snaps]


@dataclass(frozen=True)
class ConnectorState:
    at: datetime
    state: str | None               # the connector's and its tasks' worst: RUNNING when all run
    offsets: list[dict[str, Any]]
    error: str | None


def _worst(state: str | None, tasks: list[dict[str, Any]]) -> str | None:
    states = [state, *(t.get("state") for t in tasks)]
    for s in ("FAILED", "STOPPED", "PAUSED", "UNASSIGNED", "RESTARTING"):
        if s in states:
            return s
    return state


def _sink_offsets(offsets: list[dict[str, Any]]) -> dict[int, int]:
    return {int(o["partition"]["kafka_partition"]): int(o["offset"]["kafka_offset"])
            for o in offsets if "kafka_partition" in (o.get("partition") or {})
            and "kafka_offset" in (o.get("offset") or {})}


def _source_offset(offsets: list[dict[str, Any]]) -> dict[str, Any] | None:
    return (offsets[0].get("offset") or None) if len(offsets) == 1 else None


def connector_events(states: list[ConnectorState]) -> list[dict[str, Any]]:
    """What changed between consecutive snapshots of one connector, in time order:

    - `not_running`: a spell when it or a task was not RUNNING (STOPPED, PAUSED, FAILED, ...);
    - `offsets_reset`: a source's offsets there, then gone (DELETE /connectors/<name>/offsets);
    - `snapshot_again`: a source's offsets mark a snapshot (Debezium's `snapshot` key) after
      they had marked streaming: it read its tables again;
    - `offsets_rewound`: a sink's committed offset moved back on a partition;
    - `offsets_altered`: a sink's committed offset moved forward while it was stopped (PATCH
      /connectors/<name>/offsets): the records between were skipped.
    A snapshot whose cluster did not answer is no state: a run of them is a `no_answer` spell
    (a worker down, or the REST API unreachable)."""
    events: list[dict[str, Any]] = []
    silent: ConnectorState | None = None
    for prev, s in zip([None, *states], states, strict=False):
        if s.error is not None and silent is None:
            silent = prev or s
        elif s.error is None and silent is not None:
            events.append({"event": "no_answer", "between": _between(silent.at, s.at)})
            silent = None
    seen = [s for s in states if s.error is None]
    # a spell not RUNNING: the snapshot before it (or the first, already in it) and its state
    spell: tuple[ConnectorState, str] | None = \
        (seen[0], str(seen[0].state)) if seen and seen[0].state != "RUNNING" else None
    for a, b in zip(seen, seen[1:], strict=False):
        between = _between(a.at, b.at)
        if b.state != "RUNNING" and spell is None:
            spell = (a, str(b.state))
        if spell is not None and b.state == "RUNNING":
            events.append({"event": "not_running", "between": _between(spell[0].at, b.at),
                           "state": spell[1]})
            spell = None
        src_a, src_b = _source_offset(a.offsets), _source_offset(b.offsets)
        if a.offsets and not b.offsets and src_a is not None:
            events.append({"event": "offsets_reset", "between": between})
        if src_a is not None and src_b is not None and "snapshot" not in src_a \
                and "snapshot" in src_b:
            # streaming, then snapshotting: it read its tables again
            events.append({"event": "snapshot_again", "between": between})
        sink_a, sink_b = _sink_offsets(a.offsets), _sink_offsets(b.offsets)
        for part, before in sorted(sink_a.items()):
            after = sink_b.get(part)
            if after is None:
                continue
            if after < before:
                events.append({"event": "offsets_rewound", "between": between,
                               "partition": part, "before": before, "after": after})
            elif after > before and a.state == "STOPPED" and b.state == "STOPPED":
                events.append({"event": "offsets_altered", "between": between,
                               "partition": part, "before": before, "after": after})
    if spell is not None and seen:
        events.append({"event": "not_running", "between": _between(spell[0].at, seen[-1].at),
                       "state": spell[1]})
    return sorted(events, key=lambda e: (e["between"][0], e["event"]))


def connector_timeline(con: Engine, flow: str, tier: str, name: str, start: datetime,
                       end: datetime, margin: timedelta = MAX_GAP) -> dict[str, Any]:
    """The connector's events the snapshots from `start - margin` to `end + margin` show."""
    lo, hi = iso_us(start - margin), iso_us(end + margin)
    rows = _rows(con, select(C.taken_at, C.state, C.tasks, C.offsets, C.error)
                 .where(C.flow == flow, C.tier == tier, C.name == name,
                        C.taken_at.between(lo, hi)).order_by(C.taken_at))
    states = [ConnectorState(parse_instant(t, f"connector snapshot of {flow}"),
                             _worst(state, json.loads(tasks or "[]")),
                             json.loads(offsets or "[]"), error)
              for t, state, tasks, offsets, error in rows]
    return {"name": name, "snapshots": len(states),
            "first": iso_z(states[0].at) if states else None,
            "last": iso_z(states[-1].at) if states else None,
            "events": connector_events(states)}
