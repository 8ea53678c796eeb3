"""A pipeline that runs as in production, for the live-scheduler test and the soak.

An application writes orders into its database as they happen (a thread: one row every
1/rate seconds, its time now); the drill's producer app tails that table into a topic (a CDC
connector's way, each record's Kafka timestamp its row's time); the drill's consumer app loads
the topic into the sink table. Nobody stops between windows: kafka-recon must find each
window's answer while records keep arriving, as Airflow's scheduler runs it.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from harness.drill.runner import CONSUMER_BASE, SAFE_PRODUCER, App
from harness.drill.truth import sql_time

# one flow of a flow config (under `flows:`): an upstream SQLite table, the topic, and a sink
# table at `sink` (an SQLAlchemy URL) named `sink_table`; bench.fleet writes many of them
FLOW = """  {name}:
    owners: [{owner}]
    window: {window}
    grace: {grace}
    disorder: {disorder}
    replays: 2
    record: {{id: "$.id", event_time: "$.ts"}}
    tiers:
      - name: orders_db
        type: sql
        conn: "sqlite:///{upstream}"
        ids: "SELECT id, ts AS event_time FROM src WHERE ts >= :start AND ts < :end"
      - name: orders_topic
        type: kafka
        bootstrap: "{bootstrap}"
        topic: "{topic}"
        consumer_groups: [{group}]
        producer: {producer}
        consumer: {{enable.auto.commit: false}}
      - name: warehouse
        type: sql
        conn: "{sink}"
        ids: "SELECT id, ts AS event_time FROM {sink_table} WHERE ts >= :start AND ts < :end"
"""


def _connect(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(path, timeout=30, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")  # readers (the producer, kafka-recon) never block it
    return con


@dataclass
class LivePipeline:
    """Upstream table, topic and sink table under `folder`, fed without pause."""

    folder: Path
    bootstrap: str
    topic: str = "live_orders"
    group: str = "live-loader"
    rate: float = 2.0  # rows written upstream per second
    partitions: int = 3
    replication: int = 1
    topic_config: dict[str, str] = field(default_factory=dict)
    producer_config: dict[str, Any] = field(default_factory=lambda: dict(SAFE_PRODUCER))
    apps: dict[str, App] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _writer: threading.Thread | None = None
    _next_id: int = 1
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def upstream(self) -> Path:
        return self.folder / "upstream.db"

    @property
    def sink(self) -> Path:
        return self.folder / "sink.db"

    def flow_yaml(self, name: str, window: str, grace: str, disorder: str,
                  owner: str = "live@example.com") -> str:
        producer = "{" + ", ".join(f"{k}: {str(v).lower() if isinstance(v, bool) else v}"
                                   for k, v in self.producer_config.items()
                                   if k in ("acks", "enable.idempotence", "retries")) + "}"
        return "flows:\n" + FLOW.format(
            name=name, owner=owner, window=window, grace=grace, disorder=disorder,
            upstream=self.upstream, sink=f"sqlite:///{self.sink}", sink_table="dst",
            bootstrap=self.bootstrap, topic=self.topic, group=self.group, producer=producer)

    # ------------------------------------------------------------------ lifecycle
    def start(self, prefill: Sequence[tuple[datetime, datetime, int]] = ()) -> LivePipeline:
        """Tables and topic made; each of `prefill` (start, end, n): n rows of that past span
        first (windows that closed before the pipeline was watched); then the apps and the
        writer."""
        from confluent_kafka.admin import AdminClient, NewTopic

        self.folder.mkdir(parents=True, exist_ok=True)
        for db, ddl in ((self.upstream, "CREATE TABLE src (id INTEGER PRIMARY KEY, ts TEXT)"),
                        (self.sink, "CREATE TABLE dst (id INTEGER, ts TEXT)")):
            con = _connect(db)
            con.execute(ddl)
            con.close()
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for fut in admin.create_topics(
                [NewTopic(self.topic, self.partitions, self.replication,
                          config=self.topic_config)]).values():
            fut.result(30)
        for start, end, n in prefill:
            step = (end - start) / (n + 1)
            self._insert([start + step * (k + 1) for k in range(n)])
        self.apps["producer"] = self._producer(self.producer_config)
        self.apps["consumer"] = self._consumer()
        self._writer = threading.Thread(target=self._write, name="upstream-writer", daemon=True)
        self._writer.start()
        return self

    def _insert(self, times: list[datetime]) -> list[int]:
        with self._lock:
            ids = list(range(self._next_id, self._next_id + len(times)))
            self._next_id += len(times)
        con = _connect(self.upstream)
        try:
            con.executemany("INSERT INTO src VALUES (?, ?)",
                            [(i, sql_time(t)) for i, t in zip(ids, times, strict=True)])
        finally:
            con.close()
        return ids

    def _write(self) -> None:
        # at most five inserts a second: a faster rate writes its rows in batches, their times
        # spread over the moments since the last batch, as the application made them
        period = max(1 / self.rate, 0.2)
        owed = 0.0  # rows due, fractions carried over: the rate holds over a window
        while not self._stop.wait(period):
            owed += self.rate * period
            each, owed = int(owed), owed - int(owed)
            if each:
                now = datetime.now(UTC)
                step = timedelta(seconds=period) / each
                self._insert([now - step * (each - 1 - k) for k in range(each)])

    # ------------------------------------------------------------------ faults' levers
    def _next_folder(self, role: str) -> Path:
        n = sum(1 for _ in (self.folder / "apps").glob(f"{role}*"))
        return self.folder / "apps" / (role if n == 0 else f"{role}-{n}")

    def _sent(self) -> int:
        """The last upstream id any producer sent (each incarnation's ledger)."""
        from harness.drill import ledger

        return max((i for f in (self.folder / "apps").glob("producer*")
                    for i in ledger.ids(f / "ledger", "sent")), default=0)

    def swap_producer(self, config: dict[str, Any]) -> App:
        """The producer stops (sending what it holds) and one with `config` takes over from
        the next upstream row, as a redeploy with new settings does."""
        self.apps["producer"].stop(120)
        self.apps["producer"] = self._producer(config, after=self._sent())
        return self.apps["producer"]

    def _producer(self, config: dict[str, Any], after: int = 0) -> App:
        """A producer tailing the upstream table from the row after `after` (each incarnation
        in a folder of its own)."""
        return App("producer", self._next_folder("producer"), {
            "bootstrap": self.bootstrap, "topic": self.topic, "upstream": str(self.upstream),
            "config": config, "timestamps": "row", "follow": True, "after": after}).start()

    def _consumer(self, **spec: Any) -> App:
        return App("consumer", self._next_folder("consumer"), {
            "bootstrap": self.bootstrap, "topic": self.topic, "group": self.group,
            "commit": "after", "sink": str(self.sink), "config": CONSUMER_BASE, "batch": 50,
            **spec}).start()

    def crash_consumer_after_commit(self, timeout: float = 120) -> int:
        """The consumer is replaced by one that commits each batch before processing it and
        dies right after its first commit; the usual consumer then resumes from that commit:
        the batch is lost on the consume side (seed 000). Returns the crashed app's exit."""
        self.apps["consumer"].stop(60)
        crashed = self._consumer(commit="before", crash_after_batches=1)
        code = crashed.wait(timeout)
        self.apps["consumer"] = self._consumer()
        return code

    def stop(self) -> None:
        self._stop.set()
        if self._writer:
            self._writer.join(10)
        for app in self.apps.values():
            if app.running():
                app.stop(30)

    # ------------------------------------------------------------------ the truth
    def ids(self, table: str, start: datetime, end: datetime) -> list[int]:
        """The ids of `table` (src upstream, dst the sink) whose time lies in [start, end)."""
        db = self.upstream if table == "src" else self.sink
        con = _connect(db)
        try:
            return sorted(int(r[0]) for r in con.execute(
                f"SELECT id FROM {table} WHERE ts >= ? AND ts < ?",  # noqa: S608
                (sql_time(start), sql_time(end))))
        finally:
            con.close()

    def lose_in_sink(self, ids: list[int]) -> None:
        """The sink loses these rows (a bad load, a truncation): the window's consume-side
        loss, exactly these ids."""
        con = _connect(self.sink)
        try:
            con.executemany("DELETE FROM dst WHERE id = ?", [(i,) for i in ids])
        finally:
            con.close()


def floor_to(t: datetime, size: timedelta) -> datetime:
    """The start of the window of length `size` (aligned on the epoch, as cron's are) holding t."""
    seconds = int(size.total_seconds())
    return datetime.fromtimestamp(int(t.timestamp()) // seconds * seconds, UTC)
