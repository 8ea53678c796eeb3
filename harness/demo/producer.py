"""The demo's producer app: publishes every upstream order to the topic.

Safe settings on purpose (acks=all, idempotence): the demo's loss is on the consume side.
Each record's Kafka timestamp is the order's created_at, as a CDC connector would set it.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path


def publish_orders(db: Path, bootstrap: str, topic: str, ledger: Path) -> int:
    from confluent_kafka import KafkaError, Message, Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    acked: list[int] = []
    failed: list[str] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            acked.append(int(msg.key() or b"-1"))
        else:
            failed.append(f"{msg.key()!r}: {err}")

    with sqlite3.connect(db) as con:
        # in created_at order, as a CDC connector reads the database's log in commit order:
        # each partition's Kafka timestamps then rise with its offsets
        rows = con.execute("SELECT order_id, created_at, customer, amount FROM orders "
                           "ORDER BY created_at, order_id").fetchall()
    for order_id, created_at, customer, amount in rows:
        ts = datetime.strptime(created_at, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
        value = {"order_id": order_id, "created_at": ts.strftime("%Y-%m-%dT%H:%M:%SZ"),
                 "customer": customer, "amount": amount}
        producer.produce(topic, key=str(order_id), value=json.dumps(value),
                         timestamp=int(ts.timestamp() * 1000), on_delivery=on_delivery)
        producer.poll(0)
    remaining = producer.flush(30)
    ledger.parent.mkdir(parents=True, exist_ok=True)
    ledger.write_text(json.dumps({"sent": len(rows), "acked": sorted(acked),
                                  "failed": failed, "unflushed": remaining}))
    if failed or remaining:
        raise RuntimeError(f"demo producer: {len(failed)} failed, {remaining} unflushed")
    return len(acked)
