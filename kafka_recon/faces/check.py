"""`kafka-recon check`: could every flow run, and what would a run read? Without Spark.

For the flow config it validates every flow and every field (one line per error); for each valid
flow it resolves every connection (Airflow's or AIRFLOW_CONN_*), runs the preflight a run runs
(the cluster reached and authenticated, every ACL a run needs, the schema registry answering)
and reads what the run would read over the last closed window: each topic's partitions, their
offsets and the window's records, each SQL tier's rows, each Flume agent's counters, each
Kafka Connect connector's state and its tasks' (a FAILED one is an error). A flow
could run when nothing failed; the command exits 0 only if every flow could, and kafka-recon's
own databases (the store, the snapshot store) answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_recon.config import Flow, FlumeTier, KafkaTier, SqlTier, TableTier, load_flows_partial
from kafka_recon.errors import ReconError, UsageError, one_line
from kafka_recon.window import Window, iso_z

if TYPE_CHECKING:
    from kafka_recon.sources.kafka_client import KafkaEndpoint
    from kafka_recon.sources.topic import PartitionRange

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class FlowCheck:
    """One flow's answer: what each tier would give a run, and every reason it could not run."""

    name: str
    window: Window | None = None
    lines: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    kind: str = "flow"  # or "stores": kafka-recon's own databases

    @property
    def could_run(self) -> bool:
        return not self.errors


def last_closed_window(flow: Flow, now: datetime | None = None) -> Window:
    """The latest window of the flow's schedule whose closing time has passed."""
    now = now or datetime.now(UTC)
    end = EPOCH + ((now - flow.closing - EPOCH) // flow.window) * flow.window
    return Window(end - flow.window, end, flow.closing)


def _attempt(check: FlowCheck, tier: str, read: Callable[[], list[str]]) -> None:
    """Run one tier's reads; a failure is one of the flow's errors, named by tier."""
    try:
        check.lines += [f"{tier}: {line}" for line in read()]
    except ReconError as exc:
        check.errors.append(f"{tier}: {exc}")
    except Exception as exc:  # a client library's own error: still one line, still named
        check.errors.append(f"{tier}: {one_line(exc)}")


def _kafka(tier: KafkaTier, window: Window) -> list[str]:
    from kafka_recon.cluster import preflight
    from kafka_recon.sources.kafka_client import endpoint
    from kafka_recon.sources.topic import window_offsets

    ep = endpoint(tier)  # resolves its connection: an unknown one fails here
    # reached, authenticated, every ACL: the run's own preflight and its message
    preflight.check(ep, tier.topic, tier.consumer_groups)
    ranges = window_offsets(ep, tier.topic, Window.millis(window.start),
                            Window.millis(window.closes_at), verify_end=True)
    lines = [f"topic '{tier.topic}' on {ep.where}: {len(ranges)} partition(s), "
             f"{sum(r.end - r.start for r in ranges)} record(s) in the window (offsets, "
             "not yet replayed)"]
    lines += [f"  partition {r.partition}: log {r.log_start}..{r.high_watermark}, "
              f"window {r.start}..{r.end} ({r.end - r.start})"
              + (f": {r.why}" if r.why else "") for r in ranges]
    lines += _transactions(ep, tier, ranges)
    if tier.schema_registry:
        from kafka_recon.sources.registry import client

        subjects = client(ep.registry_conf(tier.schema_registry)).get_subjects()
        lines.append(f"schema registry {tier.schema_registry}: answers, "
                     f"{len(subjects)} subject(s)")
    return lines


def _transactions(ep: KafkaEndpoint, tier: KafkaTier, ranges: list[PartitionRange]
                  ) -> list[str]:
    """The transactions open on the topic, each named; TransactionOpen when one holds back the
    window's read (its run would be inconclusive)."""
    from kafka_recon.cluster.transactions import (
        TransactionOpen,
        blocked_partitions,
        named,
        open_transactions,
        stable_offsets,
    )

    offsets = stable_offsets(ep, tier.topic, [r.partition for r in ranges])
    if blocked := blocked_partitions(ep, tier.topic, ranges, offsets):
        raise TransactionOpen(tier.topic, named(ep, tier.topic, blocked))
    held = [p for p, (lso, hw) in offsets.items() if lso < hw]
    if not held:
        return []
    return [f"  open transaction, after the window: partition {t.partition}: {t.text()}"
            for t in open_transactions(ep, tier.topic, held)]


def _sql(flow: Flow, tier: SqlTier, window: Window) -> list[str]:
    from kafka_recon.sources.sql import place, stage_sql_tier

    point = stage_sql_tier(tier, window, flow.bucket)
    kind = "ids" if point.kind == "ids" else "counted"
    return [f"{place(tier)}: {point.count} row(s) in the window ({kind})"]


def _flume(tier: FlumeTier) -> list[str]:
    from kafka_recon.sources.flume import fetch_metrics, parse_metrics

    snap = parse_metrics(tier, fetch_metrics(tier), datetime.now(UTC))
    return [f"agent {tier.metrics_url}: counters readable, source '{tier.source}' accepted "
            f"{snap.source_accepted}, sink '{tier.sink}' drained {snap.sink_drained} since "
            "their start (a window is counted from the snapshots that bracket it)"]


def _store() -> list[str]:
    from sqlalchemy import func, select

    from kafka_recon.sources.connections import where
    from kafka_recon.stores.database import engine, store_url
    from kafka_recon.stores.lease import leases, metadata

    url = store_url()
    with engine(url, metadata).connect() as con:
        held = con.execute(select(func.count()).select_from(leases)).scalar_one()
    return [f"{where(url)}: answers; {held} window(s) held by a run now"]


def _runs_root() -> list[str]:
    from kafka_recon.runfolder import store_of
    from kafka_recon.stores import objects

    root = objects.runs_root()
    if isinstance(root, Path):
        return [f"{root}: a folder on this host (every host must share it, or use s3://)"]
    objects.check(root)
    return [f"{store_of(root)}: answers; run folders under {root}"]


def _snapshot_store() -> list[str]:
    from sqlalchemy import func, select

    from kafka_recon.sources.connections import where
    from kafka_recon.stores import snapshots

    url = snapshots.snapshots_url()
    if not snapshots.exists(url):
        return [f"{where(url)}: nothing snapshotted yet (the recon_snapshots DAG, or "
                "`kafka-recon snapshot`, fills it)"]
    t = snapshots.partition_snapshot.c
    with snapshots.connect().connect() as con:
        last = con.execute(select(func.max(t.taken_at))).scalar_one()
    return [f"{where(url)}: answers; newest topic snapshot {last or 'none'}"]


STORES: dict[str, Callable[[], list[str]]] = {
    "store": _store, "runs root": _runs_root, "snapshot store": _snapshot_store}


def check_stores() -> FlowCheck:
    """Whether kafka-recon's own stores answer: the store (history, leases), the runs root (a
    folder, or an object store) and the snapshot store. Every host of a deployment must reach
    the same ones."""
    out = FlowCheck("kafka-recon's stores", kind="stores")
    for name, read in STORES.items():
        _attempt(out, name, read)
    return out


def check_flow(flow: Flow, window: Window | None = None) -> FlowCheck:
    window = window or last_closed_window(flow)
    out = FlowCheck(flow.name, window)
    for tier in flow.tiers:
        _attempt(out, tier.name, partial(_tier, flow, tier, window))
    for name in flow.connectors:
        _attempt(out, name, partial(_connector, flow, name))
    return out


def _connector(flow: Flow, tier_name: str) -> list[str]:
    """A connector's state and every task's, from its Connect cluster's REST API: a FAILED
    connector or task, or a cluster that does not answer, is an error naming it."""
    from kafka_recon.errors import ConnectorFailed
    from kafka_recon.sources.connect import snapshot

    c = flow.connectors[tier_name]
    source = any(t.name == tier_name for t in flow.kafka_tiers)
    snap = snapshot(c, tier_name, "source" if source else "sink")
    role = snap.role
    what = f"{role} connector '{c.name}' at {snap.cluster}"
    if snap.error:
        raise ConnectorFailed(f"{what}: {snap.error}")
    tasks = "; ".join(t.said for t in snap.tasks) or "no tasks"
    if snap.failed:
        raise ConnectorFailed(f"{what}: {snap.state}; {tasks}")
    extra = f", dead-letter queue '{snap.dead_letter_topic}'" if snap.dead_letter_topic \
        else (", errors.tolerance=all with no dead-letter queue" if snap.tolerance == "all"
              else "")
    return [f"{what}: {snap.state}; {tasks}{extra}"]


def _tier(flow: Flow, tier: KafkaTier | SqlTier | FlumeTier | TableTier, window: Window
          ) -> list[str]:
    if isinstance(tier, KafkaTier):
        return _kafka(tier, window)
    if isinstance(tier, SqlTier):
        return _sql(flow, tier, window)
    if isinstance(tier, TableTier):
        return _table(tier)
    return _flume(tier)


def _table(tier: TableTier) -> list[str]:
    """A table is read by Spark only: here, a local path is looked for; a catalog's table or
    an object store's path is left to the run."""
    from kafka_recon.errors import TableTierError

    if tier.format == "iceberg" or "://" in tier.table:
        return [f"{tier.format} table {tier.table}: read by Spark in the run (not checked here)"]
    path, what = Path(tier.table), f"tier '{tier.name}' ({tier.format} table {tier.table})"
    if not any(path.parent.glob(path.name)):  # Parquet's may be a glob
        raise TableTierError(f"{what}: no such path")
    if tier.format == "delta" and not (path / "_delta_log").is_dir():
        raise TableTierError(f"{what}: not a Delta table (no _delta_log in it)")
    return [f"{tier.format} table {tier.table}: there (read by Spark in the run)"]


def check_config(config: Path, only: str | None = None,
                 window: tuple[datetime, datetime] | None = None) -> Iterator[FlowCheck]:
    """Each flow's check, the flows whose config is wrong first (their errors only)."""
    flows, errors = load_flows_partial(config)
    if only is not None and only not in flows and only not in errors:
        raise UsageError(f"{config}: no flow named '{only}' (flows: "
                         f"{', '.join(sorted({*flows, *errors})) or 'none'})")
    for name, error in sorted(errors.items()):
        if only in (None, name):
            yield FlowCheck(name if name != "(file)" else str(config),
                            errors=str(error).splitlines())
    for name, flow in sorted(flows.items()):
        if only in (None, name):
            yield check_flow(flow, Window(*window, flow.closing) if window else None)


def render(check: FlowCheck) -> list[str]:
    if check.kind == "stores":
        head = f"{check.name}: " + ("answer" if check.could_run else
                                    f"{len(check.errors)} of {len(STORES)} do not answer")
        return [head, *(f"  {line}" for line in check.lines),
                *(f"  error: {e}" for e in check.errors)]
    verdict = "could run" if check.could_run else f"cannot run ({len(check.errors)} error(s))"
    head = f"flow '{check.name}': {verdict}"
    if check.window is not None:
        head += f", window {iso_z(check.window.start)}..{iso_z(check.window.end)}"
    return [head, *(f"  {line}" for line in check.lines),
            *(f"  error: {e}" for e in check.errors)]


def summary(checks: list[FlowCheck], where: str) -> list[str]:
    bad = sorted(c.name for c in checks if not c.could_run)
    return [f"flow config {where}",
            f"{len(checks) - len(bad)} of {len(checks)} flow(s) could run"
            + (f"; not: {', '.join(bad)}" if bad else "")]


def as_json(checks: list[FlowCheck]) -> list[dict[str, Any]]:
    return [{"flow": c.name, "could_run": c.could_run, "lines": c.lines, "errors": c.errors,
             "window": c.window.as_json() if c.window else None} for c in checks]


def window_of(start: str | None, end: str | None) -> tuple[datetime, datetime] | None:
    if start is None and end is None:
        return None
    if start is None or end is None:
        raise UsageError("--start and --end: give both, or neither for each flow's last "
                         "closed window")
    w = Window.parse(start, end)
    return w.start, w.end


