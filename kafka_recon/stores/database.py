"""The store's engine and clock.

Every host of a deployment reads the same store, so time that decides who holds what (a
lease's expiry) is the database's own clock, never a worker's.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path

from sqlalchemy import Connection, Engine, MetaData, create_engine, text
from sqlalchemy.exc import SQLAlchemyError

from kafka_recon.errors import StoreUnreachable
from kafka_recon.settings import runs_root, store_conn


def store_url() -> str:
    """The store's SQLAlchemy URL: `KAFKA_RECON_STORE` (a URL or a connection id), else SQLite
    in the runs root."""
    from kafka_recon.sources.connections import resolve

    conn = store_conn()
    return resolve(conn) if conn else f"sqlite:///{runs_root() / 'history.db'}"


@functools.cache
def _engine(url: str) -> Engine:
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        # writers on one host wait for each other rather than fail at once
        return create_engine(url, connect_args={"timeout": 30})
    # a connection the database dropped (restarted, idle timeout) is replaced, not reused
    return create_engine(url, pool_pre_ping=True)


_created: set[tuple[str, int]] = set()


def engine(url: str, metadata: MetaData) -> Engine:
    """The engine of `url` (one per process), with `metadata`'s tables created once."""
    eng = _engine(url)
    if (url, id(metadata)) not in _created:
        for attempt in range(1, 4):
            try:
                metadata.create_all(eng)
                break
            except SQLAlchemyError as exc:
                # two hosts making a new store's tables at one moment: both saw none, one
                # created them first ("already exists"); the next look finds them
                if attempt == 3:
                    raise unreachable(url, exc) from exc
                time.sleep(0.2 * attempt)
        _created.add((url, id(metadata)))
    return eng


def unreachable(url: str, exc: BaseException) -> StoreUnreachable:
    """The one-line error of a store that failed to answer, naming it without credentials."""
    from kafka_recon.sources.connections import where

    first = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return StoreUnreachable(f"kafka-recon's store ({where(url)}) did not answer: "
                            f"{first[0] if first else type(exc).__name__}")


def now(con: Connection) -> float:
    """The database's time in seconds since the epoch: one clock for every host."""
    dialect = con.dialect.name
    if dialect == "postgresql":
        query = "SELECT EXTRACT(EPOCH FROM clock_timestamp())"
    elif dialect == "sqlite":
        query = "SELECT (julianday('now') - 2440587.5) * 86400.0"
    elif dialect in ("mysql", "mariadb"):
        query = "SELECT UNIX_TIMESTAMP(NOW(6))"
    else:
        return time.time()
    return float(con.execute(text(query)).scalar_one())
