"""The snapshot store: the Flume counters' and the flight recorder's snapshots, taken every few
minutes by one host and read by the runs of every other.

Where: `KAFKA_RECON_SNAPSHOTS` (an SQLite file, or an SQLAlchemy URL), else kafka-recon's store
when one is configured (`KAFKA_RECON_STORE`: one database for everything runs share), else
`<runs>/snapshots.db`. The tables and their columns are those of the SQLite stores written
before, so an existing store reads on. A snapshot taken again at the same instant replaces the
first (delete, then insert, in one transaction: the same on every database).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    and_,
    delete,
    insert,
    select,
)
from sqlalchemy.exc import SQLAlchemyError

from kafka_recon.settings import setting, snapshots_path, store_conn
from kafka_recon.sources.flume import Snapshot
from kafka_recon.stores.database import engine, store_url, unreachable
from kafka_recon.window import parse_instant

metadata = MetaData()


def _key(*names: str) -> list[Column[Any]]:
    return [Column(n, String(200), primary_key=True) for n in names]


flume_snapshot = Table(
    "flume_snapshot", metadata, *_key("flow", "tier"),
    Column("taken_at", String(40), primary_key=True),  # ISO text to the microsecond
    Column("source_start", BigInteger), Column("source_accepted", BigInteger),
    Column("sink_start", BigInteger), Column("sink_drained", BigInteger),
    Column("raw", Text, nullable=False),
)

partition_snapshot = Table(
    "partition_snapshot", metadata, *_key("flow", "topic"),
    Column("taken_at", String(40), primary_key=True),
    Column("partition", Integer, primary_key=True),
    Column("leader", Integer, nullable=False), Column("leader_epoch", Integer),
    Column("replicas", Text, nullable=False), Column("isr", Text, nullable=False),
    Column("log_start", BigInteger), Column("log_end", BigInteger), Column("error", Text),
)

group_snapshot = Table(
    "group_snapshot", metadata, *_key("flow", "topic", "grp"),
    Column("taken_at", String(40), primary_key=True),
    Column("state", Text), Column("committed", Text), Column("members", Text),
    Column("error", Text),
)


connector_snapshot = Table(
    "connector_snapshot", metadata, *_key("flow", "tier"),
    Column("taken_at", String(40), primary_key=True),
    Column("name", String(200), nullable=False), Column("state", Text),
    Column("tasks", Text), Column("offsets", Text), Column("error", Text),
)


def snapshots_url(where: Path | str | None = None) -> str:
    """The store's URL: `where` (a file or a URL), else the settings (see the module)."""
    given = where if where is not None else setting("KAFKA_RECON_SNAPSHOTS", "snapshots")[0]
    if given is None and store_conn():
        return store_url()
    text = str(given if given is not None else snapshots_path())
    return text if "://" in text else f"sqlite:///{Path(text).expanduser()}"


def exists(url: str) -> bool:
    """False only for an SQLite file never written: nothing was ever snapshotted there."""
    return not url.startswith("sqlite:///") or Path(url.removeprefix("sqlite:///")).exists()


def connect(where: Path | str | None = None) -> Engine:
    """The snapshot store, its tables made on first use."""
    return engine(snapshots_url(where), metadata)


def replace_rows(con: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert `rows`, replacing any with the same key (inside the caller's transaction)."""
    keys = [c.name for c in table.primary_key.columns]
    for row in rows:
        con.execute(delete(table).where(and_(*(table.c[k] == row[k] for k in keys))))
    if rows:
        con.execute(insert(table), rows)


def write(eng: Engine, table: Table, rows: list[dict[str, Any]]) -> None:
    try:
        with eng.begin() as con:
            replace_rows(con, table, rows)
    except SQLAlchemyError as exc:
        raise unreachable(str(eng.url), exc) from exc


# ------------------------------------------------------------------ Flume counters
def keep_flume(eng: Engine, flow: str, tier: str, taken_at: str, snap: Snapshot,
               raw: str) -> None:
    write(eng, flume_snapshot, [{
        "flow": flow, "tier": tier, "taken_at": taken_at, "source_start": snap.source_start,
        "source_accepted": snap.source_accepted, "sink_start": snap.sink_start,
        "sink_drained": snap.sink_drained, "raw": raw}])


def flume_snapshots(flow: str, tier: str, where: Path | str | None = None) -> list[Snapshot]:
    """A tier's snapshots, in time order."""
    t = flume_snapshot.c
    try:
        with connect(where).connect() as con:
            rows = con.execute(select(t.taken_at, t.source_start, t.source_accepted,
                                      t.sink_start, t.sink_drained)
                               .where(t.flow == flow, t.tier == tier)).all()
    except SQLAlchemyError as exc:
        raise unreachable(snapshots_url(where), exc) from exc
    # sorted as times, not text: stores written before microseconds mix both spellings
    return sorted((Snapshot(parse_instant(r[0], f"snapshot of {flow}/{tier}"), r[1], r[2],
                            r[3], r[4]) for r in rows), key=lambda s: s.taken_at)
