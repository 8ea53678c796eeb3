"""Every run's per-hop, per-bucket results, kept in a database (docs/design.md, "History").

It lives in kafka-recon's store (kafka_recon.stores): SQLite by default
(`<runs root>/history.db`); PostgreSQL or any SQLAlchemy database through `KAFKA_RECON_STORE`,
an SQLAlchemy URL or an Airflow connection id. A run is keyed by flow and
window: recording a window again replaces its rows in one transaction, so re-runs never double.
The history feeds the volume band of the Great Expectations suite and the plugin page.
"""

from __future__ import annotations

import json
import statistics
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    Column,
    DateTime,
    Engine,
    Integer,
    MetaData,
    String,
    Subquery,
    Table,
    Text,
    delete,
    insert,
    select,
)

from kafka_recon.config import Flow
from kafka_recon.result.model import Result
from kafka_recon.runfiles.bands import Bands
from kafka_recon.runfiles.outcomes import Volume
from kafka_recon.stores.database import engine as store_engine
from kafka_recon.stores.database import store_url
from kafka_recon.window import iso_z, parse_instant

metadata = MetaData()


def _window_key() -> list[Column[Any]]:
    """The key every table starts with: a run is one flow over one window."""
    return [Column("flow", String(200), primary_key=True),
            Column("window_start", DateTime(timezone=True), primary_key=True),
            Column("window_end", DateTime(timezone=True), primary_key=True)]


runs = Table(
    "recon_run", metadata, *_window_key(),
    Column("status", String(20), nullable=False),
    Column("findings", Integer, nullable=False),  # loss-verdict findings, audit risks excluded
    Column("summary", Text, nullable=False),  # the one-line verdict
    Column("run_dir", Text, nullable=False),
    Column("report", Text),
    Column("data_docs", Text),
    Column("recorded_at", DateTime(timezone=True), nullable=False),
)

tier_buckets = Table(
    "recon_tier_bucket", metadata, *_window_key(),
    Column("tier", String(200), primary_key=True),
    Column("bucket", DateTime(timezone=True), primary_key=True),
    Column("records", Integer, nullable=False),
)

# each tier's band per bucket, as the run judged its volume (bands.json): the metrics export
# it beside the count (a table of its own: an older store gains it untouched)
tier_bands = Table(
    "recon_tier_band", metadata, *_window_key(),
    Column("tier", String(200), primary_key=True),
    Column("bucket", DateTime(timezone=True), primary_key=True),
    Column("low", Integer, nullable=False),
    Column("high", Integer, nullable=False),
)

# a tier's records per bucket counted for windows never reconciled (`kafka-recon history
# seed`): a new flow's volume is judged from its first days; never shown as a window
tier_seeds = Table(
    "recon_tier_seed", metadata,
    Column("flow", String(200), primary_key=True),
    Column("tier", String(200), primary_key=True),
    Column("bucket", DateTime(timezone=True), primary_key=True),
    Column("records", Integer, nullable=False),
    Column("seeded_at", DateTime(timezone=True), nullable=False),
)

# write, consume, replication, process: a store made when sides were at most 10 characters
# long is widened when opened (`engine`)
SIDE_LENGTH = 20

hop_buckets = Table(
    "recon_hop_bucket", metadata, *_window_key(),
    Column("hop", String(400), primary_key=True),
    Column("bucket", DateTime(timezone=True), primary_key=True),
    Column("side", String(SIDE_LENGTH), nullable=False),
    Column("expected", Integer, nullable=False),
    Column("observed", Integer, nullable=False),
    Column("missing", Integer, nullable=False),
    Column("unexpected", Integer, nullable=False),
    Column("duplicate", Integer, nullable=False),
)


# the record findings of a window against their tolerance: what the metrics alert on (a
# table of its own, made when a store is opened, so an older store gains it untouched)
findings_table = Table(
    "recon_finding", metadata, *_window_key(),
    Column("hop", String(400), primary_key=True),
    Column("kind", String(40), primary_key=True),
    Column("side", String(SIDE_LENGTH), nullable=False),
    Column("records", Integer, nullable=False),
    Column("allowed", Integer),  # None: no tolerance applies to the kind
    Column("failed", Integer, nullable=False),  # 1: outside its tolerance
)


def history_url() -> str:
    return store_url()


_widened: set[str] = set()


def engine(url: str | None = None) -> Engine:
    url = url or history_url()
    eng = store_engine(url, metadata)
    if url not in _widened:
        _widen_side(eng)
        _widened.add(url)
    return eng


def _widen_side(eng: Engine) -> None:
    """A history made before the replication and process sides had a 10-character side
    column: PostgreSQL would refuse 'replication' (SQLite keeps any length)."""
    from sqlalchemy import inspect, text

    if eng.dialect.name != "postgresql":
        return
    col = next(c for c in inspect(eng).get_columns("recon_hop_bucket") if c["name"] == "side")
    length = getattr(col["type"], "length", None)
    if length is not None and length < SIDE_LENGTH:
        with eng.begin() as con:
            con.execute(text(f"ALTER TABLE recon_hop_bucket ALTER COLUMN side TYPE "
                             f"VARCHAR({SIDE_LENGTH})"))


def _t(iso: str) -> datetime:
    return parse_instant(iso, "history")


def _utc(t: datetime) -> datetime:
    # SQLite gives back naive datetimes: they were written as UTC
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def record(result: Result, run_dir: str, report: str | None = None,
           data_docs: str | None = None, eng: Engine | None = None,
           now: datetime | None = None, bands: Bands | None = None) -> dict[str, int]:
    """Replace the window's rows with this result's (and the bands its volume was judged
    against); returns how many rows were written."""
    eng = eng or engine()
    key = {"flow": result.flow, "window_start": _t(result.window.start),
           "window_end": _t(result.window.end)}
    # a tier with no record in the window still has its zero (the page and chart show it)
    tier_rows = [{**key, "tier": t.name, "bucket": _t(b), "records": n}
                 for t in result.tiers
                 for b, n in (t.buckets or {result.window.start: 0}).items()]
    hop_rows = [{**key, "hop": h.name, "bucket": _t(b.bucket), "side": h.side,
                 **b.model_dump(exclude={"bucket"})}
                for h in result.hops for b in h.buckets]
    # one row per hop and kind (a kind found twice on a hop, e.g. two groups' retention
    # losses, is summed; it fails when any part of it does)
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for f in result.record_findings:
        if f.words.failure:
            row = found.setdefault((f.hop, f.kind), {
                **key, "hop": f.hop, "kind": f.kind, "side": f.side, "records": 0,
                "allowed": f.allowed, "failed": 0})
            row["records"] += f.count
            row["failed"] = max(row["failed"], int(f.fails))
    band_rows = [{**key, "tier": b.tier, "bucket": _t(b.bucket), "low": b.low, "high": b.high}
                 for b in (bands.bands if bands else [])]
    with eng.begin() as con:
        for table in (findings_table, hop_buckets, tier_buckets, tier_bands, runs):
            con.execute(delete(table).where(table.c.flow == key["flow"],
                                            table.c.window_start == key["window_start"],
                                            table.c.window_end == key["window_end"]))
        con.execute(insert(runs).values(
            **key, status=result.status,
            # record findings of a failing kind: neither the audit's risks nor late records
            findings=sum(f.words.failure for f in result.record_findings),
            summary=result.verdict(), run_dir=run_dir, report=report, data_docs=data_docs,
            recorded_at=now or datetime.now(UTC)))
        if tier_rows:
            con.execute(insert(tier_buckets), tier_rows)
        if hop_rows:
            con.execute(insert(hop_buckets), hop_rows)
        if found:
            con.execute(insert(findings_table), list(found.values()))
        if band_rows:
            con.execute(insert(tier_bands), band_rows)
    return {"runs": 1, "tier_buckets": len(tier_rows), "hop_buckets": len(hop_rows),
            "findings": len(found)}


def tier_volume(flow: str, tier: str, start: datetime, end: datetime,
                eng: Engine | None = None) -> int | None:
    """Records a tier had in a recorded window, or None when that window was never recorded."""
    from sqlalchemy import func

    eng = eng or engine()
    with eng.connect() as con:
        known = con.execute(select(runs.c.status).where(
            runs.c.flow == flow, runs.c.window_start == start, runs.c.window_end == end)).first()
        if known is None or known[0] == "inconclusive":
            return None  # an inconclusive window did not see everything: no baseline
        n = con.execute(select(func.coalesce(func.sum(tier_buckets.c.records), 0)).where(
            tier_buckets.c.flow == flow, tier_buckets.c.tier == tier,
            tier_buckets.c.window_start == start, tier_buckets.c.window_end == end)).scalar()
    return int(n or 0)


def volume_band(flow: Flow, tier: str, start: datetime, end: datetime,
                eng: Engine | None = None) -> Volume:
    """The band the window's volume should fall in, learned from the same weekday's windows.

    Seed 004's "fewer records after the exam than before it": with no upstream count, a drop
    against the same window of the trailing weeks is the only signal. The band is the median of
    those windows, widened by the flow's `volume.band` each way; with fewer than
    `volume.min_history` of them there is no band, and the report says so.
    """
    history = []
    for k in range(1, flow.volume.weeks + 1):
        n = tier_volume(flow.name, tier, start - timedelta(weeks=k), end - timedelta(weeks=k),
                        eng)
        if n is not None:
            history.append(n)
    if len(history) < flow.volume.min_history:
        return Volume(tier=tier, history=history,
                      note=f"volume band not checked: {len(history)} of the "
                           f"{flow.volume.min_history} same-weekday windows it needs are "
                           "recorded")
    mid = statistics.median(history)
    return Volume(tier=tier, history=history, median=mid,
                  min=int(mid * (1 - flow.volume.band)), max=int(mid * (1 + flow.volume.band)))


def bucket_history(flow: str, tier: str, since: datetime, until: datetime,
                   eng: Engine | None = None) -> dict[datetime, int]:
    """A tier's records per bucket start over [since, until), from the windows whose history
    can be trusted: ok (judged within tolerance), and without a volume finding (an outage
    must not become the new normal)."""
    eng = eng or engine()
    t, f = tier_buckets.c, findings_table.c
    flagged = select(f.window_start).where(f.flow == flow, f.kind == "volume")
    q = (select(t.bucket, t.records)
         .join(runs, (runs.c.flow == t.flow) & (runs.c.window_start == t.window_start)
               & (runs.c.window_end == t.window_end))
         .where(t.flow == flow, t.tier == tier, t.bucket >= since, t.bucket < until,
                runs.c.status == "ok", t.window_start.not_in(flagged)))
    seeded = select(tier_seeds.c.bucket, tier_seeds.c.records).where(
        tier_seeds.c.flow == flow, tier_seeds.c.tier == tier, tier_seeds.c.bucket >= since,
        tier_seeds.c.bucket < until)
    with eng.connect() as con:
        # a reconciled window's count wins over a seeded one of the same bucket
        out = {_utc(b): int(n) for b, n in con.execute(seeded)}
        out.update({_utc(b): int(n) for b, n in con.execute(q)})
        return out


def usual_lags(flow: str, tier: str, since: datetime, until: datetime,
               eng: Engine | None = None) -> list[float]:
    """For each trusted window (ok, no volume finding) ending in [since, until): how long
    before its end the tier's last bucket with records ended, in seconds: how fresh the tier
    usually is at a window's end."""
    from sqlalchemy import func

    eng = eng or engine()
    t, f = tier_buckets.c, findings_table.c
    flagged = select(f.window_start).where(f.flow == flow, f.kind == "volume")
    q = (select(t.window_end, func.max(t.bucket))
         .join(runs, (runs.c.flow == t.flow) & (runs.c.window_start == t.window_start)
               & (runs.c.window_end == t.window_end))
         .where(t.flow == flow, t.tier == tier, t.records > 0, t.window_end >= since,
                t.window_end < until, runs.c.status == "ok", t.window_start.not_in(flagged))
         .group_by(t.window_end))
    with eng.connect() as con:
        return [(_utc(end) - _utc(last)).total_seconds() for end, last in con.execute(q)]


def seed(flow: str, tier: str, buckets: dict[datetime, int], eng: Engine | None = None,
         now: datetime | None = None) -> int:
    """Keep a tier's counted buckets as history to judge volume by (replacing those buckets'
    earlier seeds); returns the rows written."""
    eng = eng or engine()
    rows = [{"flow": flow, "tier": tier, "bucket": _utc(b), "records": n,
             "seeded_at": now or datetime.now(UTC)} for b, n in buckets.items()]
    if not rows:
        return 0
    starts = [_utc(b) for b in buckets]
    with eng.begin() as con:
        con.execute(delete(tier_seeds).where(
            tier_seeds.c.flow == flow, tier_seeds.c.tier == tier,
            tier_seeds.c.bucket >= min(starts), tier_seeds.c.bucket <= max(starts)))
        con.execute(insert(tier_seeds), rows)
    return len(rows)


def _newest_windows() -> Subquery:
    """(flow, ws): the start of each flow's newest recorded window."""
    from sqlalchemy import func

    return select(runs.c.flow, func.max(runs.c.window_start).label("ws")) \
        .group_by(runs.c.flow).subquery()


def latest_per_flow(eng: Engine | None = None) -> list[dict[str, Any]]:
    """The newest window of every flow, for the plugin page."""
    eng = eng or engine()
    newest = _newest_windows()
    q = select(runs).join(newest, (runs.c.flow == newest.c.flow)
                          & (runs.c.window_start == newest.c.ws)).order_by(runs.c.flow)
    with eng.connect() as con:
        return [_run_row(r._mapping) for r in con.execute(q)]


def previous_status(flow: str, before: str, eng: Engine | None = None) -> str | None:
    """The status of the flow's newest recorded window that starts before `before` (None:
    there is none), for telling a recovery from an ok day among ok days."""
    eng = eng or engine()
    with eng.connect() as con:
        row = con.execute(select(runs.c.status)
                          .where(runs.c.flow == flow, runs.c.window_start < _t(before))
                          .order_by(runs.c.window_start.desc()).limit(1)).first()
    return str(row[0]) if row else None


def latest_hops(eng: Engine | None = None) -> list[dict[str, Any]]:
    """Every hop of every flow's newest window: (flow, hop, side, missing, duplicate,
    unexpected), summed over its buckets, for the metrics."""
    from sqlalchemy import func

    eng = eng or engine()
    newest = _newest_windows()
    h = hop_buckets
    q = (select(h.c.flow, h.c.hop, h.c.side, func.sum(h.c.missing), func.sum(h.c.duplicate),
                func.sum(h.c.unexpected))
         .join(newest, (h.c.flow == newest.c.flow) & (h.c.window_start == newest.c.ws))
         .group_by(h.c.flow, h.c.hop, h.c.side).order_by(h.c.flow, h.c.hop))
    with eng.connect() as con:
        return [{"flow": f, "hop": hop, "side": side, "missing": int(m or 0),
                 "duplicate": int(d or 0), "unexpected": int(u or 0)}
                for f, hop, side, m, d, u in con.execute(q)]


def latest_tiers(eng: Engine | None = None) -> list[dict[str, Any]]:
    """Every tier of every flow's newest window: its records, and, where its volume was
    judged, the fewest and most its history expected over the judged buckets, for the
    metrics."""
    from sqlalchemy import func

    eng = eng or engine()
    newest = _newest_windows()
    t, b = tier_buckets.c, tier_bands.c
    counted = (select(t.flow, t.tier, func.sum(t.records))
               .join(newest, (t.flow == newest.c.flow) & (t.window_start == newest.c.ws))
               .group_by(t.flow, t.tier))
    # the judged buckets' records beside their bands (an empty bucket has no count row)
    banded = (select(b.flow, b.tier, func.sum(b.low), func.sum(b.high),
                     func.sum(func.coalesce(t.records, 0)))
              .join(newest, (b.flow == newest.c.flow) & (b.window_start == newest.c.ws))
              .outerjoin(tier_buckets, (t.flow == b.flow) & (t.window_start == b.window_start)
                         & (t.window_end == b.window_end) & (t.tier == b.tier)
                         & (t.bucket == b.bucket))
              .group_by(b.flow, b.tier))
    with eng.connect() as con:
        bands = {(f, tier): (int(lo), int(hi), int(n or 0))
                 for f, tier, lo, hi, n in con.execute(banded)}
        return [{"flow": f, "tier": tier, "records": int(n or 0),
                 "judged": bands.get((f, tier)) is not None,
                 "judged_records": bands[(f, tier)][2] if (f, tier) in bands else None,
                 "expected_low": bands[(f, tier)][0] if (f, tier) in bands else None,
                 "expected_high": bands[(f, tier)][1] if (f, tier) in bands else None}
                for f, tier, n in con.execute(counted)]


def latest_findings(eng: Engine | None = None) -> list[dict[str, Any]]:
    """The record findings of every flow's newest window, with the records their tolerance
    allowed and whether they failed it, for the metrics."""
    eng = eng or engine()
    newest = _newest_windows()
    f = findings_table
    q = (select(f.c.flow, f.c.hop, f.c.kind, f.c.side, f.c.records, f.c.allowed, f.c.failed)
         .join(newest, (f.c.flow == newest.c.flow) & (f.c.window_start == newest.c.ws))
         .order_by(f.c.flow, f.c.hop, f.c.kind))
    with eng.connect() as con:
        return [dict(r._mapping) for r in con.execute(q)]


def epoch(iso: str) -> float:
    """Seconds since the epoch of a time as the history rows give it."""
    return _t(iso).timestamp()


def flow_runs(flow: str, limit: int = 60, eng: Engine | None = None) -> list[dict[str, Any]]:
    """A flow's recorded windows, newest first, each with its per-hop missing and duplicate."""
    from sqlalchemy import func

    eng = eng or engine()
    with eng.connect() as con:
        rows = [_run_row(r._mapping) for r in con.execute(
            select(runs).where(runs.c.flow == flow)
            .order_by(runs.c.window_start.desc()).limit(limit))]
        sums = con.execute(
            select(hop_buckets.c.window_start, hop_buckets.c.window_end,
                   func.sum(hop_buckets.c.missing), func.sum(hop_buckets.c.duplicate))
            .where(hop_buckets.c.flow == flow)
            .group_by(hop_buckets.c.window_start, hop_buckets.c.window_end)).all()
        vols = con.execute(
            select(tier_buckets.c.window_start, tier_buckets.c.window_end, tier_buckets.c.tier,
                   func.sum(tier_buckets.c.records))
            .where(tier_buckets.c.flow == flow)
            .group_by(tier_buckets.c.window_start, tier_buckets.c.window_end,
                      tier_buckets.c.tier)).all()
    by_window = {(_utc(s), _utc(e)): (int(m or 0), int(d or 0)) for s, e, m, d in sums}
    tiers: dict[tuple[datetime, datetime], dict[str, int]] = {}
    for s, e, t, n in vols:
        tiers.setdefault((_utc(s), _utc(e)), {})[t] = int(n or 0)
    for r in rows:
        key = (_t(r["window_start"]), _t(r["window_end"]))
        r["missing"], r["duplicate"] = by_window.get(key, (0, 0))
        r["tiers"] = tiers.get(key, {})
    return rows


def windows_between(since: datetime, until: datetime, flows: set[str] | None = None,
                    eng: Engine | None = None) -> list[tuple[str, int, int, str, int, str]]:
    """Every recorded window that starts in [since, until), for the Reconciliation page's
    grid, as (flow, start, end, status, tolerated, summary): times as seconds since the
    epoch, `tolerated` the records findings let through by their tolerance, the verdict line
    only for a window that is not ok (a fleet's day is tens of thousands of windows). Three
    queries over the whole span, never one per window."""
    from sqlalchemy import func

    eng = eng or engine()
    span = [runs.c.window_start >= since, runs.c.window_start < until]
    f = findings_table
    tolerated = [f.c.window_start >= since, f.c.window_start < until, f.c.failed == 0,
                 f.c.records > 0]
    if flows is not None:
        span.append(runs.c.flow.in_(sorted(flows)))
        tolerated.append(f.c.flow.in_(sorted(flows)))

    def key(flow: str, t: datetime) -> tuple[str, int]:
        return flow, int(_utc(t).timestamp())

    with eng.connect() as con:
        rows = con.execute(select(runs.c.flow, runs.c.window_start, runs.c.window_end,
                                  runs.c.status).where(*span)).all()
        said = {key(fl, s): text for fl, s, text in con.execute(
            select(runs.c.flow, runs.c.window_start, runs.c.summary)
            .where(*span, runs.c.status != "ok"))}
        within = {key(fl, s): int(n or 0) for fl, s, n in con.execute(
            select(f.c.flow, f.c.window_start, func.sum(f.c.records))
            .where(*tolerated).group_by(f.c.flow, f.c.window_start))}
    out = []
    for fl, s, e, status in rows:
        k = key(fl, s)
        out.append((fl, k[1], int(_utc(e).timestamp()), str(status), within.get(k, 0),
                    said.get(k, "")))
    return out


def neighbours(flow: str, start: str, eng: Engine | None = None
               ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The flow's recorded windows just before and just after the one starting at `start`."""
    eng = eng or engine()
    cols = (runs.c.window_start, runs.c.window_end, runs.c.status, runs.c.run_dir)
    with eng.connect() as con:
        before = con.execute(select(*cols).where(runs.c.flow == flow,
                                                 runs.c.window_start < _t(start))
                             .order_by(runs.c.window_start.desc()).limit(1)).first()
        after = con.execute(select(*cols).where(runs.c.flow == flow,
                                                runs.c.window_start > _t(start))
                            .order_by(runs.c.window_start).limit(1)).first()
    return (_run_row(before._mapping) if before else None,
            _run_row(after._mapping) if after else None)


def _run_row(m: Any) -> dict[str, Any]:
    out = dict(m)
    for k in ("window_start", "window_end", "recorded_at"):
        if k in out:
            out[k] = iso_z(_utc(out[k]))
    return out


def dumps(rows: list[dict[str, Any]]) -> str:
    return json.dumps(rows, indent=2, default=str)
