"""Step 1, stage: check and count the upstream sources of one window.

An `ids:` tier is checked here (reachable, returns `id` and `event_time`) and counted; Spark reads
its ids itself later. A `counts:` tier is read here, whole: its query returns one row per bucket
(`bucket`, `count`), a handful of rows. Flume tiers are staged from metrics snapshots
(kafka_recon.sources.flume).
"""

from __future__ import annotations

import contextlib
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kafka_recon.config import SqlTier
from kafka_recon.errors import ConnectionUnusable, SqlTierError
from kafka_recon.runfiles.stage import StagedPoint
from kafka_recon.sources.connections import resolve, where
from kafka_recon.sources.dialects import session_args
from kafka_recon.sources.hooks import hook_engine
from kafka_recon.window import Window

log = logging.getLogger(__name__)


def _engine(tier: SqlTier) -> tuple[Any, str]:
    """The tier's engine and where it points, for messages: through the connection's provider
    hook where Airflow holds the connection, else from its URL with the bundled driver."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError

    try:
        hooked = hook_engine(tier.conn)
        if hooked is not None:
            log.info("tier '%s': staged through %s", tier.name, hooked.hook)
            return hooked.engine, f"{where(hooked.url)} through {hooked.hook}"
        url = resolve(tier.conn)
    except ConnectionUnusable as exc:
        raise ConnectionUnusable(f"tier '{tier.name}': {exc}") from None
    u = make_url(url)
    # SQLite would silently create an empty file where a database was expected
    if u.get_backend_name() == "sqlite" and u.database and not Path(u.database).exists():
        raise SqlTierError(f"tier '{tier.name}': sqlite file {u.database} does not exist")
    try:
        return create_engine(url, connect_args=session_args(url)), where(url)
    except (SQLAlchemyError, ImportError) as exc:  # a driver that is not installed
        raise SqlTierError(f"tier '{tier.name}' ({where(url)}): {exc}") from None


def place(tier: SqlTier) -> str:
    """Where the tier's rows are read, for a message: its database and, staged through a
    provider hook, the hook's name. Opens no connection."""
    engine, where_ = _engine(tier)
    engine.dispose()
    return where_


def _run(tier: SqlTier, sql: str, params: dict[str, Any]) -> tuple[list[str], list[Any]]:
    from sqlalchemy import text

    engine, place = _engine(tier)
    try:
        with engine.connect() as con:
            res = con.execute(text(sql), params)
            return list(res.keys()), list(res.fetchall())
    # a hook's get_conn raises its provider's own errors too (a missing client library, an
    # IAM token refused), not only the driver's
    except Exception as exc:
        reason = (str(getattr(exc, "orig", None) or exc).strip().splitlines() or [repr(exc)])[0]
        raise SqlTierError(f"tier '{tier.name}' ({place}): {reason}") from exc
    finally:
        engine.dispose()


def _require(tier: SqlTier, kind: str, columns: list[str], needed: tuple[str, ...]) -> None:
    lower = [c.lower() for c in columns]
    absent = [c for c in needed if c not in lower]
    if absent:
        raise SqlTierError(f"tier '{tier.name}': the '{kind}' query returns columns {columns}; "
                          f"it must return {', '.join(repr(c) for c in needed)} "
                          f"(missing {', '.join(absent)})")


def stage_sql_tier(tier: SqlTier, window: Window, bucket: timedelta) -> StagedPoint:
    params = window.sql_params()
    if tier.ids is not None:
        columns, _ = _run(tier, f"SELECT * FROM ({tier.ids}) AS q WHERE 1 = 0", params)
        _require(tier, "ids", columns, ("id", "event_time"))
        _, rows = _run(tier, f"SELECT COUNT(*), COUNT(DISTINCT id) FROM ({tier.ids}) AS q",
                       params)
        return StagedPoint(name=tier.name, kind="ids", count=int(rows[0][0]),
                           distinct=int(rows[0][1]))
    columns, rows = _run(tier, tier.counts or "", params)
    _require(tier, "counts", columns, ("bucket", "count"))
    idx = {c.lower(): i for i, c in enumerate(columns)}
    buckets: dict[str, int] = {}
    for row in rows:
        key = _bucket_key(row[idx["bucket"]], window, bucket, tier.name)
        buckets[key] = buckets.get(key, 0) + int(row[idx["count"]])
    return StagedPoint(name=tier.name, kind="counts", count=sum(buckets.values()),
                       buckets=buckets)


def bucket_counts(tier: SqlTier, window: Window, bucket: timedelta) -> dict[str, int]:
    """A tier's records per bucket of the window, without reading its rows: a counts query's
    buckets, or one COUNT(*) of the ids query per bucket (what seeding the history reads)."""
    if tier.ids is None:
        return stage_sql_tier(tier, window, bucket).buckets
    out: dict[str, int] = {}
    t = window.start
    while t < window.end:
        part = Window(t, min(t + bucket, window.end))
        _, rows = _run(tier, f"SELECT COUNT(*) FROM ({tier.ids}) AS q", part.sql_params())
        out[t.strftime("%Y-%m-%dT%H:%M:%SZ")] = int(rows[0][0])
        t += bucket
    return out


def _bucket_key(value: Any, window: Window, bucket: timedelta, tier: str) -> str:
    """A count query's bucket value, aligned to the flow's bucket and written in UTC."""
    if isinstance(value, str):
        with contextlib.suppress(ValueError):  # text that is no time is refused below
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if not isinstance(value, datetime):
        raise SqlTierError(f"tier '{tier}': the counts query's 'bucket' must be a time, "
                          f"got {value!r}")
    value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    steps = (value - window.start) // bucket
    return (window.start + steps * bucket).strftime("%Y-%m-%dT%H:%M:%SZ")
