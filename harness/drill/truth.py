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
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

Key = tuple[str, str, str]  # (kind, side, hop)


@dataclass
class Truth:
    upstream: Counter[int]
    topic: Counter[int]             # window records in the topic, late ones included
    late: set[int]
    sinks: dict[str, Counter[int]] = field(default_factory=dict)
    # the topics after the first, in flow order: (tier name, side of the hop into it, ids)
    chain: list[tuple[str, str, Counter[int]]] = field(default_factory=list)

    def of(self, name: str) -> Counter[int]:
        return next(ids for n, _, ids in self.chain if n == name)


def sql_time(t: datetime) -> str:
    """How the drill's SQLite tables spell a time (text that sorts as time)."""
    return t.strftime("%Y-%m-%d %H:%M:%S")


def table_ids(path: Path, start: datetime, end: datetime) -> Counter[int]:
    """The ids (with their copies) of Parquet files a streaming job wrote, whose `ts` is in
    [start, end): read with pyarrow, apart from the Spark that reconciles."""
    import pyarrow.dataset as ds

    if not path.exists():
        return Counter()
    table = ds.dataset(str(path), format="parquet").to_table(columns=["id", "ts"])
    lo, hi = start.replace(tzinfo=None), end.replace(tzinfo=None)
    return Counter(int(i) for i, t in zip(table.column("id").to_pylist(),
                                          table.column("ts").to_pylist(), strict=True)
                   if i is not None and t is not None
                   and lo <= t.replace(tzinfo=None) < hi)


def url_ids(url: str, table: str, start: datetime, end: datetime) -> Counter[int]:
    """The ids of a table in a database kafka-recon reads (MariaDB), whose `ts` is in
    [start, end): what its committed rows hold."""
    from sqlalchemy import create_engine, text

    from kafka_recon.sources.connections import resolve

    engine = create_engine(resolve(url))
    try:
        with engine.connect() as con:
            rows = con.execute(text(f"SELECT id FROM {table} WHERE ts >= :lo AND ts < :hi"),  # noqa: S608
                               {"lo": start.replace(tzinfo=None), "hi": end.replace(tzinfo=None)})
            return Counter(int(r[0]) for r in rows)
    finally:
        engine.dispose()


def sql_ids(path: str, table: str, start: datetime, end: datetime) -> Counter[int]:
    lo, hi = sql_time(start), sql_time(end)
    con = sqlite3.connect(path)
    try:
        rows = con.execute(f"SELECT id FROM {table} WHERE ts >= ? AND ts < ?", (lo, hi))  # noqa: S608
        return Counter(int(r[0]) for r in rows)
    finally:
        con.close()


def record_fields(rec: dict[str, Any]) -> dict[str, Any]:
    """{id, ts} of a drill record, as written or as the drill's processor reshapes it."""
    inner = rec.get("order")
    return {"id": inner["id"], "ts": inner["at"]} if isinstance(inner, dict) else rec


def read_topic(bootstrap: str, topic: str) -> Iterator[Any]:
    """Every record of a topic (read_committed, every partition from its log start, none of a
    topic that does not exist), by a plain consumer apart from the reconciliation."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafka-recon-drill-truth",
                  "enable.auto.commit": False, "isolation.level": "read_committed",
                  "enable.partition.eof": True, "log_level": 0})
    try:
        md = c.list_topics(topic, timeout=15).topics.get(topic)
        if md is None or md.error is not None:
            return
        tps = []
        for p in sorted(md.partitions):
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=15,
                                                cached=False)
            if high > low:
                tps.append(TopicPartition(topic, p, low))
        c.assign(tps)
        pending = {tp.partition for tp in tps}
        while pending:
            m: Any = c.poll(15)
            if m is None:
                raise RuntimeError(f"truth: topic '{topic}' stopped answering while read")
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    pending.discard(m.partition())
                    continue
                raise RuntimeError(f"truth: reading '{topic}': {m.error()}")
            yield m
    finally:
        c.close()


def topic_ids(bootstrap: str, topic: str, start: datetime, end: datetime,
              closes: datetime) -> tuple[Counter[int], set[int]]:
    """(ids of window records in the topic, those that arrived late), read record by record."""
    seen: Counter[int] = Counter()
    late: set[int] = set()
    s_ms, e_ms, c_ms = (int(t.timestamp() * 1000) for t in (start, end, closes))
    for m in read_topic(bootstrap, topic):
        rec = record_fields(json.loads(m.value()))
        event_ms = int(datetime.fromisoformat(rec["ts"].replace("Z", "+00:00"))
                       .timestamp() * 1000)
        kafka_ms = m.timestamp()[1]
        if not s_ms <= event_ms < e_ms or kafka_ms >= c_ms:
            continue  # outside the window, or after grace: not the window's record
        seen[int(rec["id"])] += 1
        if kafka_ms >= e_ms:
            late.add(int(rec["id"]))
    return seen, late


def chain_findings(chain: list[tuple[str, Counter[int]]], sides: list[str]
                   ) -> dict[Key, dict[str, Any]]:
    """The findings a perfect detector reports along a chain of id tiers (name, ids with their
    copies), hop i from chain[i] to chain[i + 1] on sides[i]: ids lost, ids from nowhere
    upstream, and copies beyond what the tier before held (a duplicate is the hop's where it
    first appears)."""
    f: dict[Key, dict[str, Any]] = {}

    def add(key: Key, ids: set[int], count: int | None = None) -> None:
        if ids:
            f[key] = {"ids": ids, "count": len(ids) if count is None else count}

    for i, ((a, up), (b, down)) in enumerate(zip(chain, chain[1:], strict=False)):
        hop, side = f"{a}->{b}", sides[i]
        before = set().union(*(set(c) for _, c in chain[: i + 1]))
        add(("loss", side, hop), set(up) - set(down))
        add(("unexpected", side, hop), set(down) - before)
        dup = {k: n - max(up.get(k, 1), 1) for k, n in down.items() if n > max(up.get(k, 1), 1)}
        add(("duplicate", side, hop), set(dup), sum(dup.values()))
    return f


def expected_findings(truth: Truth, write_hop: str, topic: str = "topic"
                      ) -> dict[str, dict[Key, dict[str, Any]]]:
    """Per sink: the findings a perfect detector reports, with their exact ids and counts. A
    flow through several topics runs on through each (`chain`) before the sink."""
    out: dict[str, dict[Key, dict[str, Any]]] = {}
    upstream_name = write_hop.split("->")[0]
    for sink_name, sk in truth.sinks.items():
        chain = [(upstream_name, truth.upstream), (topic, truth.topic)]
        sides = ["write"]
        for name, side, ids in truth.chain:
            chain.append((name, ids))
            sides.append(side)
        chain.append((sink_name, sk))
        sides.append("consume")
        f = chain_findings(chain, sides)
        # the write hop is named after its own upstream point (a Flume agent's inner hop)
        f = {(k, s, write_hop if s == "write" else h): v for (k, s, h), v in f.items()}
        if truth.late:
            f[("late", "write", write_hop)] = {"ids": truth.late, "count": len(truth.late)}
        out[sink_name] = f
    return out
