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

With `stats` in the spec (a path), the producer's own statistics go there every 10 s, one JSON
line each: how long records waited in it, how long the broker took to answer, and how late the
loop's ticks came, so that a window whose records reached the upstream and the topic late is
told from a loss.

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
        # an application's commit, not a bank's: a synced commit per tick of 20 flows beside
        # Kafka and PostgreSQL held the loop back
        self.con.execute("PRAGMA synchronous=NORMAL")
        self.con.execute("CREATE TABLE IF NOT EXISTS src (id INTEGER PRIMARY KEY, ts TEXT)")

    def write(self, times: list[datetime], producer: Any) -> None:
        """Rows at `times`: inserted upstream in one transaction, then each produced."""
        assert self.con is not None
        ids = range(self.next_id, self.next_id + len(times))
        self.next_id += len(times)
        rows = [(i, sql_time(t)) for i, t in zip(ids, times, strict=True)]
        # one transaction: in autocommit each row was a commit and a sync of its own, and on
        # a busy disk the loop fell minutes behind, writing rows stamped minutes in the past
        # (the fleet of 2026-12-06: 8 windows with "lost" records that were only late)
        self.con.execute("BEGIN")
        self.con.executemany("INSERT INTO src VALUES (?, ?)", rows)
        self.con.execute("COMMIT")
        for (i, ts), t in zip(rows, times, strict=True):
            while True:
                try:
                    producer.produce(self.topic, key=str(i), value=record(i, ts),
                                     timestamp=int(t.timestamp()) * 1000)
                    break
                except BufferError:  # the producer's queue is full: let it send
                    producer.poll(0.1)


def producer_stats(raw: str) -> dict[str, Any]:
    """The figures of librdkafka's statistics that say whether records reach the broker late:
    the worst broker's round trip and the time records waited in the producer (p99 and max, in
    seconds), requests waiting, timed out and retried, and the records queued."""
    doc = json.loads(raw)
    brokers = [b for b in doc.get("brokers", {}).values() if b.get("nodeid", -1) >= 0]

    def worst(window: str, key: str) -> float:
        return round(max((b.get(window, {}).get(key, 0) for b in brokers), default=0) / 1e6, 3)

    return {"at": round(doc.get("time", 0)), "queued": doc.get("msg_cnt", 0),
            "rtt_p99_s": worst("rtt", "p99"), "rtt_max_s": worst("rtt", "max"),
            "wait_p99_s": worst("int_latency", "p99"), "wait_max_s": worst("int_latency", "max"),
            "waiting_responses": sum(b.get("waitresp_cnt", 0) for b in brokers),
            "timeouts": sum(b.get("req_timeouts", 0) for b in brokers),
            "retries": sum(b.get("txretries", 0) for b in brokers)}


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
    """Rows at each flow's rate until `stop`."""
    from confluent_kafka import Producer

    feeds = [Feed(f["name"], f["topic"], Path(f["upstream"]), f["sink_table"], f["rate"])
             for f in spec["flows"]]
    for f in feeds:
        f.open()
    make_tables(spec["sink"], feeds)
    stats: dict[str, Any] = {}
    # the longest a tick came after the last since the last statistics: a late tick writes
    # rows stamped over its delay, which reach the upstream and the topic that late
    behind = {"tick_max_s": 0.0}
    if spec.get("stats"):
        path = Path(spec["stats"])

        def write_stats(raw: str) -> None:  # called in the loop's poll, every 10 s
            with path.open("a") as out:
                out.write(json.dumps({**producer_stats(raw), **behind}) + "\n")
            behind["tick_max_s"] = 0.0

        stats = {"statistics.interval.ms": 10_000, "stats_cb": write_stats}
    # room for minutes of every flow's records should the broker stall
    producer = Producer({"bootstrap.servers": spec["bootstrap"], "enable.idempotence": True,
                         "acks": "all", "linger.ms": 50,
                         "queue.buffering.max.messages": 2_000_000,
                         "queue.buffering.max.kbytes": 1_048_576, **stats})
    loader = threading.Thread(target=load, args=(spec["bootstrap"], spec["sink"], feeds, stop),
                              name="loader", daemon=True)
    loader.start()
    since = datetime.now(UTC)
    period = 0.2  # at most five inserts a second a flow
    while not stop.wait(period):
        # the rows due since the last tick, by the clock: a tick that came late (a busy
        # machine) writes more, so each flow keeps its rate over a window
        now = datetime.now(UTC)
        elapsed, since = now - since, now
        behind["tick_max_s"] = max(behind["tick_max_s"], round(elapsed.total_seconds(), 2))
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
