"""The drill's client applications: a producer and a consumer, run as their own processes.

    python -m harness.drill.apps SPEC.json

They are ordinary confluent-kafka applications whose settings come from the scenario (`SPEC`),
so a fault can kill them like any process. Neither knows about kafka-recon: the producer reads
the upstream table as a change-data-capture app would and publishes each row as JSON; the
consumer writes each record into its sink table. Each keeps its ledger (`ledger.Ledger`).

Producer spec: bootstrap, topic, upstream (SQLite file), ledger, config (librdkafka settings),
callback (false: fire-and-forget, errors unseen), rate (records/s, 0 = as fast as possible),
pad ({id: bytes} of payload padding), hold ({ids, until}: sent only from `until`, epoch s),
transactions ({batch, abort_every, hang_after}: each batch in a transaction, every n-th
aborted and sent again; with hang_after n, the batch after the n-th is sent in a transaction
left open, its `hanging` ledger event written, and the app waits to be killed),
timestamps ("row": each record's Kafka timestamp is its row's time, as a CDC connector
sets it; default: the time of sending), follow (true: after the rows there are, keep reading
rows added to the table, as a CDC connector tails a log, until SIGTERM; the soak's producer),
after (an id: rows up to it were sent by an earlier producer and are skipped).

Consumer spec: bootstrap, topic, group, sink (SQLite file), ledger, config, commit ("auto",
"before" or "after" processing), batch, process_ms (per record), upsert (the sink keeps one row
per id), state (a JSON file the app rewrites: records processed, partitions at their end),
crash_after_batches (K: the app dies right after committing its K-th batch, before writing it,
with exit code 3; seed 000's "commit before processing" made certain), forward_to (a topic:
the app is a processor, writing each record there as {"order": {"id", "at"}} with its partition
and timestamp, instead of into the sink).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.drill.ledger import Ledger
from harness.drill.truth import record_fields

CRASH_EXIT = 3


def row_millis(ts: str) -> int:
    """An upstream row's time (as the drill's SQLite tables spell it, UTC) in epoch ms: the
    Kafka timestamp of a record stamped with its row's time."""
    return int(datetime.strptime(ts, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()
               * 1000)


def _record(row_id: int, ts: str, pad: int) -> bytes:
    return json.dumps({"id": row_id, "ts": ts, "pad": "x" * pad}).encode()


def upstream_rows(path: str, after: int = 0) -> list[tuple[int, str]]:
    """The upstream table's rows (id, created) with an id above `after`, in id order."""
    con = sqlite3.connect(path)
    try:
        return [(int(i), str(t)) for i, t in con.execute(
            "SELECT id, ts FROM src WHERE id > ? ORDER BY id", (after,))]
    finally:
        con.close()


def run_producer(spec: dict[str, Any]) -> int:
    from confluent_kafka import KafkaException, Producer

    ledger = Ledger(Path(spec["ledger"]))
    conf = {"bootstrap.servers": spec["bootstrap"], "log_level": 3, **spec.get("config", {})}
    producer = Producer(conf)
    topic = spec["topic"]
    pad = {int(k): int(v) for k, v in spec.get("pad", {}).items()}
    hold = spec.get("hold") or {}
    held = set(hold.get("ids", []))
    rate = float(spec.get("rate", 0))
    tx = spec.get("transactions")
    row_time = spec.get("timestamps") == "row"

    def on_delivery(err: Any, msg: Any) -> None:
        row_id = int(msg.key())
        if err is None:
            ledger.write("acked", row_id, msg.partition(), msg.offset())
        else:
            ledger.write("failed", row_id, err.name())

    callback = on_delivery if spec.get("callback", True) else None
    rows = upstream_rows(spec["upstream"], int(spec.get("after", 0)))
    now_rows = [r for r in rows if r[0] not in held]
    later_rows = [r for r in rows if r[0] in held]

    def send(batch: list[tuple[int, str]]) -> None:
        began = time.monotonic()
        for n, (row_id, ts) in enumerate(batch):
            kwargs: dict[str, Any] = {"on_delivery": callback} if callback else {}
            if row_time:
                kwargs["timestamp"] = row_millis(ts)
            while True:
                try:
                    producer.produce(topic, key=str(row_id), value=_record(row_id, ts,
                                     pad.get(row_id, 0)), **kwargs)
                    ledger.write("sent", row_id)
                    break
                except BufferError:
                    producer.poll(0.05)  # the local queue is full: wait for room
                except KafkaException as exc:  # refused locally (size, fatal idempotence)
                    ledger.write("failed", row_id, exc.args[0].name())
                    break
            producer.poll(0)
            if rate:
                ahead = (n + 1) / rate - (time.monotonic() - began)
                if ahead > 0:
                    time.sleep(ahead)

    if tx:
        producer.init_transactions(30)
        size, abort_every = int(tx["batch"]), int(tx.get("abort_every", 0))
        hang_after = tx.get("hang_after")
        for k, i in enumerate(range(0, len(now_rows), size)):
            chunk = now_rows[i:i + size]
            if hang_after is not None and k == int(hang_after):
                producer.begin_transaction()
                send(chunk)
                producer.flush(30)
                ledger.write("hanging", chunk[0][0], chunk[-1][0])
                while True:  # a process about to die, mid-transaction
                    time.sleep(1)
            if abort_every and k % abort_every == abort_every - 1:
                producer.begin_transaction()
                send(chunk)
                producer.flush(30)
                producer.abort_transaction(30)  # the app failed half-way: it starts over
            producer.begin_transaction()
            send(chunk)
            producer.commit_transaction(30)
    else:
        send(now_rows)
    if spec.get("follow"):
        follow(spec["upstream"], max((r[0] for r in rows), default=int(spec.get("after", 0))),
               send, producer)
    if later_rows:
        wait = float(hold["until"]) - time.time()
        if wait > 0:
            producer.flush(60)
            time.sleep(wait)
        send(later_rows)
    left = producer.flush(120)
    ledger.close()
    return 0 if left == 0 else 3


def follow(upstream: str, last: int, send: Any, producer: Any) -> None:
    """Send each row added to the upstream table after `last`, until SIGTERM."""
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    while not stopping:
        rows = upstream_rows(upstream, last)
        if rows:
            send(rows)
            last = rows[-1][0]
        producer.poll(0.2)  # deliveries reported, and a pause before the next look


def run_consumer(spec: dict[str, Any]) -> int:
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

    ledger = Ledger(Path(spec["ledger"]))
    state_path = Path(spec["state"])
    commit = spec.get("commit", "after")
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))

    def on_commit(err: Any, partitions: list[Any]) -> None:
        if err is None:
            for tp in partitions:
                if tp.error is None and tp.offset >= 0:
                    ledger.write("committed", tp.partition, tp.offset)

    conf = {"bootstrap.servers": spec["bootstrap"], "group.id": spec["group"],
            "auto.offset.reset": "earliest", "enable.partition.eof": True,
            "enable.auto.commit": commit == "auto", "on_commit": on_commit, "log_level": 3,
            **spec.get("config", {})}
    consumer = Consumer(conf)
    consumer.subscribe([spec["topic"]])
    # a processor (S18) writes each record on to another topic, reshaped, instead of a table
    forward_to = str(spec.get("forward_to") or "")
    out = Producer({"bootstrap.servers": spec["bootstrap"], "acks": "all",
                    "enable.idempotence": True, "linger.ms": 5}) if forward_to else None
    sink = sqlite3.connect(spec["sink"], isolation_level=None)
    sink.execute("PRAGMA journal_mode=WAL")
    insert = "INSERT"
    if spec.get("upsert"):  # an idempotent sink: a replayed record replaces its own row
        sink.execute("CREATE UNIQUE INDEX IF NOT EXISTS dst_id ON dst (id)")
        insert = "INSERT OR REPLACE"
    process_s = float(spec.get("process_ms", 0)) / 1000
    crash_after = int(spec.get("crash_after_batches") or 0)
    at_eof: set[int] = set()
    processed = batches = 0

    def save_state() -> None:
        assigned = sorted(tp.partition for tp in consumer.assignment())
        state = {"processed": processed, "assigned": assigned,
                 "caught_up": bool(assigned) and set(assigned) <= at_eof, "t": time.time()}
        tmp = state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        tmp.replace(state_path)

    def commit_sync(offsets: list[Any]) -> None:
        """Commit, retrying while the group coordinator moves; a commit that still fails is
        skipped as any app would: the next one covers it, and a crash replays the records."""
        for _ in range(20):
            try:
                done = consumer.commit(offsets=offsets, asynchronous=False) or []
            except KafkaException as exc:
                print(f"commit failed, retrying: {exc}", file=sys.stderr, flush=True)
                time.sleep(0.5)
                continue
            for tp in done:
                if tp.error is None:
                    ledger.write("committed", tp.partition, tp.offset)
            return

    while not stopping:
        msgs: list[Any] = consumer.consume(int(spec.get("batch", 100)), 0.5)
        good = []
        for m in msgs:
            if m.error() is None:
                good.append(m)
                at_eof.discard(m.partition())
            elif m.error().code() == KafkaError._PARTITION_EOF:
                at_eof.add(m.partition())
        last: dict[int, int] = {}
        for m in good:
            last[m.partition()] = max(last.get(m.partition(), -1), m.offset())
        offsets = [TopicPartition(spec["topic"], p, o + 1) for p, o in last.items()]
        if commit == "before" and offsets:
            commit_sync(offsets)
        if good:
            batches += 1
            if batches == crash_after:
                os._exit(CRASH_EXIT)  # committed, not written: a crash, no cleanup
        for m in good:
            rec = record_fields(json.loads(m.value()))
            if process_s:
                time.sleep(process_s)
            if out is not None:
                out.produce(forward_to, key=m.key(), partition=m.partition(),
                            timestamp=m.timestamp()[1],  # kept, as Kafka Streams keeps it
                            value=json.dumps({"order": {"id": rec["id"], "at": rec["ts"]}}))
            else:
                sink.execute(f"{insert} INTO dst (id, ts) VALUES (?, ?)",
                             (int(rec["id"]), rec["ts"]))
            ledger.write("processed", rec["id"], m.partition(), m.offset())
            processed += 1
        if out is not None and good and out.flush(60):
            print("records left unsent after 60 s", file=sys.stderr, flush=True)
        if commit == "after" and offsets:
            commit_sync(offsets)
        save_state()
    consumer.close()  # commits what auto-commit stored; leaves the group cleanly
    sink.close()
    ledger.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 1:
        print("usage: python -m harness.drill.apps SPEC.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(args[0]).read_text())
    return {"producer": run_producer, "consumer": run_consumer}[spec["role"]](spec)


if __name__ == "__main__":
    raise SystemExit(main())
