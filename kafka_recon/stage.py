"""Step 1: stage upstream sources for one window (SQL counts; Flume snapshots come later)."""

from __future__ import annotations

import os
import re
from typing import Any

from kafka_recon.config import SqlTier
from kafka_recon.window import Window


class SourceError(RuntimeError):
    """A source that could not be read; the message names the tier and where it points."""


def sqlalchemy_url(conn: str) -> str:
    """A SQLAlchemy URL from a URL or an Airflow connection id.

    A connection id is read the way Airflow reads it from the environment, `AIRFLOW_CONN_<ID>`,
    so the same flow config works in Airflow tasks and from the command line.
    """
    if "://" in conn:
        return conn
    var = "AIRFLOW_CONN_" + re.sub(r"[^A-Za-z0-9]", "_", conn).upper()
    url = os.environ.get(var)
    if not url:
        raise SourceError(f"connection '{conn}': neither a URL nor set as {var}")
    # Airflow spells PostgreSQL 'postgres://'; SQLAlchemy wants 'postgresql://'
    return re.sub(r"^postgres://", "postgresql://", url)


def _where(url: str) -> str:
    from sqlalchemy.engine import make_url

    u = make_url(url)
    if u.drivername.startswith("sqlite"):
        return f"sqlite file {u.database}"
    return f"{u.drivername} at {u.host}:{u.port or 'default port'}/{u.database}"


def count_sql_tier(tier: SqlTier, window: Window) -> dict[str, Any]:
    """Rows and distinct ids an `ids:` query returns for the window."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import SQLAlchemyError

    url = sqlalchemy_url(tier.conn)
    if tier.ids is None:
        raise SourceError(f"tier '{tier.name}': count staging needs an 'ids' query")
    query = text(f"SELECT COUNT(*) AS n, COUNT(DISTINCT id) AS d FROM ({tier.ids}) AS q")
    engine = create_engine(url)
    try:
        with engine.connect() as con:
            row = con.execute(query, window.sql_params()).one()
    except SQLAlchemyError as exc:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        raise SourceError(f"tier '{tier.name}' ({_where(url)}): {reason}") from exc
    finally:
        engine.dispose()
    return {"name": tier.name, "count": int(row.n), "distinct": int(row.d)}
