"""The demo's consumer app ("orders-loader"): topic to the `orders_copy` sink table.

It commits a batch's offsets *before* writing the batch (seed 000: "commit before processing").
With `crash_after_batches=K` it dies right after committing batch K, without writing it: those
records are lost on the consume side, and the ledger names them.

    python -m harness.demo.consumer --bootstrap B --topic T --db SINK --ledger L \
        [--crash-after-batches K]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
from pathlib import Path

GROUP = "orders-loader"
CRASH_EXIT = 3


def run_consumer(bootstrap: str, topic: str, db: Path, ledger: Path,
                 crash_after_batches: int | None = None, batch_size: int = 100) -> int:
    from confluent_kafka import Consumer, KafkaError

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "enable.partition.eof": True})
    consumer.subscribe([topic])
    at_eof: set[int] = set()
    batches = processed = 0
    with sqlite3.connect(db) as con, ledger.open("a") as log:
        while True:
            msgs = consumer.consume(num_messages=batch_size, timeout=1.0)
            assigned = {tp.partition for tp in consumer.assignment()}
            records = []
            for m in msgs:
                err, partition = m.error(), m.partition()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF and partition is not None:
                        at_eof.add(partition)
                        continue
                    raise RuntimeError(f"consumer error: {err}")
                if partition is not None:
                    at_eof.discard(partition)
                records.append(json.loads(m.value() or b"null"))
            if records:
                batches += 1
                consumer.commit(asynchronous=False)  # the mistake: commit, then process
                if crash_after_batches is not None and batches == crash_after_batches:
                    log.write(json.dumps({"event": "crash", "unprocessed":
                                          [r["order_id"] for r in records]}) + "\n")
                    log.flush()
                    os._exit(CRASH_EXIT)  # a crash: no cleanup, no close
                con.executemany(
                    "INSERT OR REPLACE INTO orders_copy VALUES (?, ?, ?, ?)",
                    [(r["order_id"], r["created_at"].replace("T", " ").rstrip("Z"),
                      r["customer"], r["amount"]) for r in records])
                con.commit()
                processed += len(records)
                log.write(json.dumps({"event": "processed",
                                      "ids": [r["order_id"] for r in records]}) + "\n")
            if assigned and assigned <= at_eof and not records:
                break
    consumer.close()
    return processed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="the demo's consumer app")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--db", required=True, type=Path)
    p.add_argument("--ledger", required=True, type=Path)
    p.add_argument("--crash-after-batches", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=100)
    a = p.parse_args(argv)
    n = run_consumer(a.bootstrap, a.topic, a.db, a.ledger, a.crash_after_batches, a.batch_size)
    print(json.dumps({"processed": n}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
