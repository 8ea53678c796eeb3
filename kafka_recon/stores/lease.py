"""One run per window, across hosts: a lease in the store.

A run holds its window (flow, start, end) by a row of `recon_lease`: who (the DAG run, or a
command line process and its host), since when, and until when. The holder renews it while any
of its tasks runs (`Lease.kept`, a heartbeat every sixth of the lease); between tasks the lease
stays until it expires. A second run is refused naming the first while the lease holds; once it
has expired (the holder's host died, its task was killed) the next run takes it. A command line
run on the same host that no longer exists holds nothing, at once.

Every decision is one conditional write checked by its row count, on the database's clock, so
two hosts racing for a window cannot both win, on PostgreSQL and SQLite alike.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Column, Float, Integer, MetaData, String, Table, and_, delete, insert, select
from sqlalchemy import update as sql_update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from kafka_recon.errors import RunInProgress
from kafka_recon.settings import lease_seconds
from kafka_recon.stores.database import engine, now, store_url, unreachable

log = logging.getLogger(__name__)

metadata = MetaData()

leases = Table(
    "recon_lease", metadata,
    Column("flow", String(200), primary_key=True),
    Column("window_start", String(40), primary_key=True),  # ISO text: the window as given
    Column("window_end", String(40), primary_key=True),
    Column("owner", String(500), nullable=False),  # `<dag_id>/<run_id>` or `process N on H`
    Column("host", String(255), nullable=False),
    Column("pid", Integer),  # a command line run's process, else none
    Column("since", Float, nullable=False),  # seconds since the epoch, the database's clock
    Column("renewed", Float, nullable=False),
    Column("expires", Float, nullable=False),
)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _gone(row: Any) -> bool:
    """A command line run on this host whose process no longer exists."""
    if row.pid is None or row.host != socket.gethostname():
        return False
    try:
        os.kill(row.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    return False


@dataclass(frozen=True)
class Lease:
    """The lease of one window of one flow."""

    flow: str
    start: str
    end: str
    url: str = ""
    ttl: float = 0.0

    @classmethod
    def of(cls, flow: str, window: dict[str, str]) -> Lease:
        return cls(flow, window["start"], window["end"], store_url(), float(lease_seconds()))

    def _key(self) -> Any:
        return and_(leases.c.flow == self.flow, leases.c.window_start == self.start,
                    leases.c.window_end == self.end)

    def _what(self) -> str:
        return f"flow '{self.flow}' window {self.start}..{self.end}"

    def holder(self) -> Any:
        """The lease's row, or None."""
        try:
            with engine(self.url, metadata).connect() as con:
                return con.execute(select(leases).where(self._key())).first()
        except SQLAlchemyError as exc:
            raise unreachable(self.url, exc) from exc

    # ------------------------------------------------------------------ taking and keeping
    def claim(self, owner: str, pid: int | None = None) -> None:
        """Hold the window for `owner`, or refuse naming the run that holds it."""
        try:
            self._claim(owner, pid)
        except SQLAlchemyError as exc:
            raise unreachable(self.url, exc) from exc

    def _claim(self, owner: str, pid: int | None) -> None:
        eng = engine(self.url, metadata)
        host = socket.gethostname()
        for _ in range(5):  # a turn is lost only to another host's write in between
            with eng.begin() as con:
                t = now(con)
                row = con.execute(select(leases).where(self._key())).first()
                mine = {"owner": owner, "host": host, "pid": pid, "since": t, "renewed": t,
                        "expires": t + self.ttl}
                if row is not None:
                    if row.owner != owner and row.expires > t and not _gone(row):
                        raise self._refusal(row, t)
                    # taken only if nobody renewed or took it since it was read
                    if con.execute(sql_update(leases).where(
                            self._key(), leases.c.owner == row.owner,
                            leases.c.renewed == row.renewed).values(**mine)).rowcount == 1:
                        if row.owner != owner:
                            log.warning("%s: took the lease of %s (%s)", self._what(),
                                        row.owner, "its process is gone" if _gone(row)
                                        else f"expired {_iso(row.expires)}")
                        return
                    continue
            try:  # the first claim: the primary key lets one of two racing hosts in
                with eng.begin() as con:
                    con.execute(insert(leases).values(
                        flow=self.flow, window_start=self.start, window_end=self.end, **mine))
                return
            except IntegrityError:
                continue
        raise self._refusal(self.holder(), None)

    def _refusal(self, row: Any, t: float | None) -> RunInProgress:
        if row is None:
            return RunInProgress(f"{self._what()}: another run took the window at the same "
                                 "moment; run again")
        left = f", its lease runs {int(row.expires - t)} s more" if t is not None else ""
        return RunInProgress(
            f"{self._what()}: another run of this window is under way ({row.owner} on "
            f"{row.host}, since {_iso(row.since)}{left}): wait for it to finish, then run again")

    def check(self, owner: str) -> None:
        """A task of run `owner` goes on only while that run holds the window; renews it."""
        row = self.holder()
        if row is not None and row.owner != owner:
            raise RunInProgress(f"{self._what()}: another run of this window ({row.owner}) "
                                f"took it after this one ({owner}); this run stops here")
        if row is None:
            self.claim(owner)  # let go, or never taken: nobody else holds it
        else:
            self.renew(owner)

    def renew(self, owner: str) -> None:
        """Push the expiry one lease ahead; a lease another run has taken is an error."""
        try:
            with engine(self.url, metadata).begin() as con:
                t = now(con)
                kept = con.execute(sql_update(leases).where(
                    self._key(), leases.c.owner == owner).values(
                    renewed=t, expires=t + self.ttl)).rowcount
        except SQLAlchemyError as exc:
            raise unreachable(self.url, exc) from exc
        if kept != 1:
            raise RunInProgress(f"{self._what()}: this run ({owner}) no longer holds the "
                                "window: its lease expired and another run took it")

    def release(self, owner: str) -> None:
        """Let the window go, if `owner` holds it."""
        try:
            with engine(self.url, metadata).begin() as con:
                con.execute(delete(leases).where(self._key(), leases.c.owner == owner))
        except SQLAlchemyError as exc:
            raise unreachable(self.url, exc) from exc

    def _beat(self, owner: str, stop: threading.Event) -> None:
        while not stop.wait(max(1.0, self.ttl / 6)):
            try:
                self.renew(owner)
            except RunInProgress as exc:  # let go, or taken: nothing left to keep
                log.warning("%s", exc)
                return
            except Exception as exc:  # noqa: BLE001 (the step decides; a miss is logged)
                log.warning("%s: lease not renewed: %s", self._what(), exc)

    @contextmanager
    def kept(self, owner: str) -> Iterator[None]:
        """Renew the lease in the background while the block runs (a Spark step may take longer
        than the lease); a renewal that fails is logged and tried again."""
        stop = threading.Event()
        thread = threading.Thread(target=self._beat, args=(owner, stop), daemon=True,
                                  name="kafka-recon-lease")
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=5)

    def keep_alive(self, owner: str) -> None:
        """Renew the lease for the rest of this process (an Airflow task's): it stops when the
        process ends, or once the lease is let go or taken. One per lease and owner."""
        key = (self.url, self.flow, self.start, self.end, owner)
        with _alive_lock:
            if key in _alive and _alive[key].is_alive():
                return
            thread = threading.Thread(target=self._beat, args=(owner, threading.Event()),
                                      daemon=True, name="kafka-recon-lease")
            _alive[key] = thread
            thread.start()


_alive: dict[tuple[str, ...], threading.Thread] = {}
_alive_lock = threading.Lock()


def held(url: str | None = None) -> set[tuple[str, str, str]]:
    """(flow, start, end) of every window a run holds now (the Reconciliation page's
    'running'): one query."""
    url = url or store_url()
    try:
        with engine(url, metadata).begin() as con:
            t = now(con)
            return {(r.flow, r.window_start, r.window_end) for r in con.execute(
                select(leases.c.flow, leases.c.window_start, leases.c.window_end)
                .where(leases.c.expires > t))}
    except SQLAlchemyError as exc:
        raise unreachable(url, exc) from exc
