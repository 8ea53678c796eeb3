"""The fleet's pipelines in one process: every flow's application, producer and loader.

`bench.fleet` measured 8 flows fed by `harness.live` (an application thread, a producer process
tailing the upstream table and a consumer process per flow): the feeding took more CPU than
kafka-recon, Airflow and Spark together (476 of 900 CPU seconds in its 15 minutes), and 20
flows could not be run. Here one process does what they did, for every flow at once:

- every flow's application writes its rows into its upstream table (SQLite, one file a flow:
  what kafka-recon stages and reads), at most five inserts a second, the rows due by the clock
  since the last (each flow keeps its rate on a busy machine), their times spread over it;
- the same loop produces each row to the flow's topic at once, keyed by its id, its Kafka
  timestamp the row's time (a CDC connector's way), with one idempotent producer;
- one consumer in one group (`fleet-loader`, every flow names it) loads every topic into the
  flow's table in PostgreSQL, committing each batch after it is written (at least once).

Nothing is lost or copied in these pipelines: every window of every flow must be `ok`.

    python -m bench.feeder SPEC.json    (stops on SIGTERM)
"""

from __future__ import annotations

import json
import signal
import sqlite3
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.drill.truth import sql_time

GROUP = "fleet-loader"
PAD = 170  # a value of about 300 bytes, as the bench's records are


def record(row_id: int, ts: str) -> bytes:
    return json.dumps({"id": row_id, "ts": ts, "pad": "x" * PAD}).encode()


@dataclass
class Feed:
    """One flow's application: its upstream table, its topic and its rate."""

    name: str
    topic: str
    upstream: Path
    sink_table: str
    rate: float  # rows a second
    next_id: int = 1
    owed: float = 0.0
    con: sqlite3.Connection | None = field(default=None, repr=False)

    def open(self) -> None:
        self.con = sqlite3.connect(self.upstream, timeout=30, isolation_level=None)
        self.con.execute("PRAGMA journal_mode=WAL")  # kafka-recon reads while rows arrive
        self.con.execute("CREATE TABLE IF NOT EXISTS src (id INTEGER PRIMARY KEY, ts TEXT)")

    def write(self, times: list[datetime], producer: Any) -> None:
        """Rows at `times`: inserted upstream in one transaction, then each produced."""
        assert self.con is not None
        ids = range(self.next_id, self.next_id + len(times))
        self.next_id += len(times)
        rows = [(i, sql_time(t)) for i, t in zip(ids, times, strict=True)]
        self.con.executemany("INSERT INTO src VALUES (?, ?)", rows)
        for (i, ts), t in zip(rows, times, strict=True):
            while True:
                try:
                    producer.produce(self.topic, key=str(i), value=record(i, ts),
                                     timestamp=int(t.timestamp()) * 1000)
                    break
                except BufferError:  # the producer's queue is full: let it send
                    producer.poll(0.1)


def make_tables(dsn: str, feeds: list[Feed]) -> None:
    import psycopg2

    with psycopg2.connect(dsn) as con, con.cursor() as cur:
        for f in feeds:
            cur.execute(f"CREATE TABLE IF NOT EXISTS {f.sink_table} (id BIGINT, ts TIMESTAMP)")
            cur.execute(f"CREATE INDEX IF NOT EXISTS {f.sink_table}_ts ON {f.sink_table} (ts)")


def load(bootstrap: str, dsn: str, feeds: list[Feed], stop: threading.Event) -> None:
    """The loader: every topic into its flow's sink table, each batch committed after it is
    written."""
    import psycopg2
    from confluent_kafka import Consumer
    from psycopg2.extras import execute_values

    table = {f.topic: f.sink_table for f in feeds}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe(list(table))
    con = psycopg2.connect(dsn)
    try:
        while not stop.is_set():
            batch = consumer.consume(2000, 0.5)
            rows: dict[str, list[tuple[int, str]]] = {}
            for m in batch:
                if m.error():
                    continue
                value = json.loads(m.value() or b"{}")
                rows.setdefault(table[str(m.topic())], []).append((int(value["id"]), value["ts"]))
            if not rows:
                continue
            with con.cursor() as cur:
                for name, got in rows.items():
                    execute_values(cur, f"INSERT INTO {name} (id, ts) VALUES %s", got)  # noqa: S608
            con.commit()
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
        con.close()


def feed(spec: dict[str, Any], stop: threading.Event) -> None:
    """Every flow's prefilled rows, then rows at each flow's rate until `stop`."""
    from confluent_kafka import Producer

    feeds = [Feed(f["name"], f["topic"], Path(f["upstream"]), f["sink_table"], f["rate"])
             for f in spec["flows"]]
    for f in feeds:
        f.open()
    make_tables(spec["sink"], feeds)
    # a prefill of a whole window for every flow (a million rows and more) is queued at once
    producer = Producer({"bootstrap.servers": spec["bootstrap"], "enable.idempotence": True,
                         "acks": "all", "linger.ms": 50,
                         "queue.buffering.max.messages": 2_000_000,
                         "queue.buffering.max.kbytes": 1_048_576})
    loader = threading.Thread(target=load, args=(spec["bootstrap"], spec["sink"], feeds, stop),
                              name="loader", daemon=True)
    loader.start()
    since = datetime.now(UTC)
    for start, end in spec.get("prefill", []):
        # windows that closed before the fleet was watched, as if fed then; the live rows
        # follow on from the prefill's end, so no window after it is fed only in part
        a, b = datetime.fromisoformat(start), datetime.fromisoformat(end)
        for f in feeds:
            count = int(f.rate * (b - a).total_seconds())
            step = (b - a) / (count + 1)
            f.write([a + step * (k + 1) for k in range(count)], producer)
            producer.poll(0)
        since = b
    period = 0.2  # at most five inserts a second a flow
    while not stop.wait(period):
        # the rows due since the last tick, by the clock: a tick that came late (a busy
        # machine) writes more, so each flow keeps its rate over a window
        now = datetime.now(UTC)
        elapsed, since = now - since, now
        for f in feeds:
            f.owed += f.rate * elapsed.total_seconds()
            each, f.owed = int(f.owed), f.owed - int(f.owed)
            if each:
                step = elapsed / each
                f.write([now - elapsed + step * (k + 1) for k in range(each)], producer)
        producer.poll(0)
    producer.flush(60)
    loader.join(30)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m bench.feeder SPEC.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(args[0]).read_text())
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    began = time.monotonic()
    feed(spec, stop)
    print(f"bench.feeder: stopped after {time.monotonic() - began:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
