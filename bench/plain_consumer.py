"""What a user would write instead: read the topic with confluent-kafka, diff against upstream.

    python -m bench.plain_consumer --bootstrap B --topic T --upstream DB --out missing.csv

Reads every partition from its start to the high watermark seen at start, parses each value's
`order_id`, and writes the upstream ids the topic lacks. Prints records read and seconds.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import time
import uuid
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from confluent_kafka import Consumer, TopicPartition

    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--upstream", required=True, type=Path)
    p.add_argument("--out", required=True, type=Path)
    a = p.parse_args(argv)
    t0 = time.monotonic()
    c = Consumer({"bootstrap.servers": a.bootstrap, "group.id": f"plain-{uuid.uuid4()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "fetch.max.bytes": 52428800})
    parts = sorted(c.list_topics(a.topic, timeout=10).topics[a.topic].partitions)
    ends = {p: c.get_watermark_offsets(TopicPartition(a.topic, p), timeout=10)[1] for p in parts}
    c.assign([TopicPartition(a.topic, p, 0) for p in parts])
    seen: set[int] = set()
    done: set[int] = {p for p, e in ends.items() if e == 0}
    read = 0
    while len(done) < len(parts):
        for m in c.consume(10000, timeout=1.0):
            if m.error() is not None:
                continue
            read += 1
            seen.add(json.loads(m.value() or b"{}")["order_id"])
            part, off = m.partition(), m.offset()
            if part is not None and off is not None and off + 1 >= ends[part]:
                done.add(part)
    c.close()
    with sqlite3.connect(a.upstream) as con:
        upstream = {r[0] for r in con.execute("SELECT order_id FROM orders")}
    missing = sorted(upstream - seen)
    a.out.write_text("id\n" + "".join(f"{i}\n" for i in missing))
    print(json.dumps({"read": read, "missing": len(missing),
                      "seconds": round(time.monotonic() - t0, 3)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
