"""What really happened, from the tiers themselves and the apps' ledgers.

Independent of the reconciliation: the topic is read whole by a plain confluent-kafka consumer
(`read_committed`, every partition from its log start), the databases by `sqlite3`. The
expected findings follow from set arithmetic on the ids, with the window's own rules (an event
time inside the window; a Kafka timestamp past the window end but inside grace is late).
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

Key = tuple[str, str, str]  # (kind, side, hop)


@dataclass
class Truth:
    upstream: Counter[int]
    topic: Counter[int]             # window records in the topic, late ones included
    late: set[int]
    sinks: dict[str, Counter[int]] = field(default_factory=dict)


def sql_time(t: datetime) -> str:
    """How the drill's SQLite tables spell a time (text that sorts as time)."""
    return t.strftime("%Y-%m-%d %H:%M:%S")


def sql_ids(path: str, table: str, start: datetime, end: datetime) -> Counter[int]:
    lo, hi = sql_time(start), sql_time(end)
    con = sqlite3.connect(path)
    try:
        rows = con.execute(f"SELECT id FROM {table} WHERE ts >= ? AND ts < ?", (lo, hi))  # noqa: S608
        return Counter(int(r[0]) for r in rows)
    finally:
        con.close()


def topic_ids(bootstrap: str, topic: str, start: datetime, end: datetime,
              closes: datetime) -> tuple[Counter[int], set[int]]:
    """(ids of window records in the topic, those that arrived late), read record by record."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafka-recon-drill-truth",
                  "enable.auto.commit": False, "isolation.level": "read_committed",
                  "enable.partition.eof": True, "log_level": 0})
    try:
        md = c.list_topics(topic, timeout=15)
        parts = sorted(md.topics[topic].partitions)
        tps = []
        for p in parts:
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=15,
                                                cached=False)
            if high > low:
                tps.append(TopicPartition(topic, p, low))
        c.assign(tps)
        pending = {tp.partition for tp in tps}
        seen: Counter[int] = Counter()
        late: set[int] = set()
        s_ms, e_ms, c_ms = (int(t.timestamp() * 1000) for t in (start, end, closes))
        while pending:
            m: Any = c.poll(15)
            if m is None:
                raise RuntimeError(f"truth: topic '{topic}' stopped answering while read")
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    pending.discard(m.partition())
                    continue
                raise RuntimeError(f"truth: reading '{topic}': {m.error()}")
            rec = json.loads(m.value())
            event_ms = int(datetime.fromisoformat(rec["ts"].replace("Z", "+00:00"))
                           .timestamp() * 1000)
            kafka_ms = m.timestamp()[1]
            if not s_ms <= event_ms < e_ms or kafka_ms >= c_ms:
                continue  # outside the window, or after grace: not the window's record
            seen[int(rec["id"])] += 1
            if kafka_ms >= e_ms:
                late.add(int(rec["id"]))
        return seen, late
    finally:
        c.close()


def expected_findings(truth: Truth, write_hop: str, topic: str = "topic"
                      ) -> dict[str, dict[Key, dict[str, Any]]]:
    """Per sink: the findings a perfect detector reports, with their exact ids and counts."""
    up, tp = truth.upstream, truth.topic
    out: dict[str, dict[Key, dict[str, Any]]] = {}
    for sink_name, sk in truth.sinks.items():
        consume = f"{topic}->{sink_name}"
        f: dict[Key, dict[str, Any]] = {}

        def add(key: Key, ids: set[int], count: int | None = None,
                into: dict[Key, dict[str, Any]] = f) -> None:
            if ids:
                into[key] = {"ids": ids, "count": len(ids) if count is None else count}

        add(("loss", "write", write_hop), set(up) - set(tp))
        add(("late", "write", write_hop), truth.late)
        add(("unexpected", "write", write_hop), set(tp) - set(up))
        dup_t = {i: n - max(up.get(i, 1), 1) for i, n in tp.items() if n > max(up.get(i, 1), 1)}
        add(("duplicate", "write", write_hop), set(dup_t), sum(dup_t.values()))
        add(("loss", "consume", consume), set(tp) - set(sk))
        add(("unexpected", "consume", consume), set(sk) - set(tp) - set(up))
        dup_s = {i: n - max(tp.get(i, 1), 1) for i, n in sk.items() if n > max(tp.get(i, 1), 1)}
        add(("duplicate", "consume", consume), set(dup_s), sum(dup_s.values()))
        out[sink_name] = f
    return out
