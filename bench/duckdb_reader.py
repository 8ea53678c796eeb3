"""What a competent user would write instead of kafka-recon, giving the same full answer.

    python -m bench.duckdb_reader --bootstrap B --topic T --upstream DB --sink DB \
        --start T --end T --grace-seconds 600 --bucket-seconds 3600 --out DIR

One process: confluent-kafka reads the window's offsets twice (two fresh groups, as kafka-recon's
two replays), keeping the raw values; DuckDB parses them (vectorised JSON), reads both SQLite
tables, and answers every hop the way kafka-recon does: missing, unexpected and duplicate ids per
hop, per-bucket counts, and each read's count, distinct ids and fingerprint. Writes the id files
under DIR with kafka-recon's names (`missing/upstream__topic.csv`, ...) and `answer.json`.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

HOPS = [("upstream", "topic"), ("topic", "sink")]


def read_topic(bootstrap: str, topic: str, start_ms: int, end_ms: int
               ) -> tuple[list[int], list[int], list[int], list[bytes]]:
    """The records between the first offsets at or after start_ms and end_ms, per partition:
    (partition, offset, timestamp ms, value), read with a fresh group that commits nothing."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"duckdb-{uuid.uuid4()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760,
                  "queued.max.messages.kbytes": 1048576})
    parts = sorted(c.list_topics(topic, timeout=10).topics[topic].partitions)

    def offsets(ms: int) -> dict[int, int]:
        got = c.offsets_for_times([TopicPartition(topic, p, ms) for p in parts], timeout=10)
        out = {}
        for tp in got:
            hi = c.get_watermark_offsets(TopicPartition(topic, tp.partition), timeout=10)[1]
            out[tp.partition] = tp.offset if tp.offset >= 0 else hi  # -1: none that late
        return out

    first, last = offsets(start_ms), offsets(end_ms)
    todo = {p for p in parts if last[p] > first[p]}
    c.assign([TopicPartition(topic, p, first[p]) for p in todo])
    ps: list[int] = []
    os_: list[int] = []
    ts: list[int] = []
    vs: list[bytes] = []
    while todo:
        for m in c.consume(10000, timeout=1.0):
            if m.error() is not None:
                raise RuntimeError(str(m.error()))
            p, o = m.partition(), m.offset()
            if p is None or o is None or p not in todo or o >= last[p]:
                continue
            ps.append(p)
            os_.append(o)
            ts.append(m.timestamp()[1])
            vs.append(m.value() or b"")
            if o + 1 >= last[p]:
                todo.discard(p)
    c.close()
    return ps, os_, ts, vs


def sqlite_rows(path: Path, query: str, start: str, end: str) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as con:
        return [(str(i), t) for i, t in con.execute(query, {"start": start, "end": end})]


def main(argv: list[str] | None = None) -> int:
    import duckdb
    import pyarrow as pa

    p = argparse.ArgumentParser()
    for name in ("bootstrap", "topic", "upstream", "sink", "start", "end", "out"):
        p.add_argument(f"--{name}", required=True)
    p.add_argument("--grace-seconds", type=int, default=600)
    p.add_argument("--bucket-seconds", type=int, default=3600)
    p.add_argument("--reads", type=int, default=2)
    a = p.parse_args(argv)
    t0 = time.monotonic()
    start, end = datetime.fromisoformat(a.start), datetime.fromisoformat(a.end)
    closes = end + timedelta(seconds=a.grace_seconds)
    out = Path(a.out)
    db = duckdb.connect()

    def run(sql: str, params: dict[str, Any] | None = None) -> list[Any]:
        # DuckDB 2 keeps a statement open until its result is read: read every one
        return db.execute(sql, params).fetchall() if params else db.execute(sql).fetchall()

    run("SET TimeZone = 'UTC'")
    reads = []
    for i in range(1, a.reads + 1):
        ps, os_, ts, vs = read_topic(a.bootstrap, a.topic, int(start.timestamp() * 1000),
                                     int(closes.timestamp() * 1000))
        db.register(f"raw{i}", pa.table({"partition": ps, "offset": os_, "ts": ts,
                                         "value": pa.array(vs, pa.binary())}))
        # the window's records, parsed by DuckDB: id, event time and Kafka timestamp
        run(f"""
            CREATE TABLE r{i} AS
            SELECT id, event_time, "partition", "offset", kafka_ts FROM (
              SELECT json_extract_string(v, '$.order_id') AS id,
                     TRY_CAST(json_extract_string(v, '$.created_at') AS TIMESTAMPTZ)
                       AS event_time, "partition", "offset",
                     make_timestamp(ts * 1000) AS kafka_ts
              FROM (SELECT decode(value) AS v, * FROM raw{i}))
            WHERE id IS NOT NULL AND event_time >= $s AND event_time < $e AND kafka_ts < $c
        """, {"s": start, "e": end, "c": closes})
        db.unregister(f"raw{i}")
        [(n, d, f)] = run(f"SELECT count(*), count(DISTINCT id), "
                          f"coalesce(sum(hash(id)::HUGEINT), 0)::VARCHAR FROM r{i}")
        reads.append({"count": n, "distinct": d, "fingerprint": f})
    query = "SELECT order_id, created_at FROM {t} WHERE created_at >= :start AND created_at < :end"
    window = {"start": start.strftime("%Y-%m-%d %H:%M:%S"),
              "end": end.strftime("%Y-%m-%d %H:%M:%S")}
    for name, path, table in (("upstream", a.upstream, "orders"), ("sink", a.sink, "orders_copy")):
        rows = sqlite_rows(Path(path), query.format(t=table), window["start"], window["end"])
        db.register(f"{name}_rows", pa.table({"id": [r[0] for r in rows],
                                              "t": [r[1] for r in rows]}))
        run(f"CREATE TABLE {name} AS SELECT id, CAST(t AS TIMESTAMP) AS event_time "
            f"FROM {name}_rows")
    run("CREATE VIEW topic AS SELECT id, event_time FROM r1")
    origin = int(start.timestamp())
    for tier in ("upstream", "topic", "sink"):
        run(f"""
            CREATE TABLE ids_{tier} AS SELECT id, count(*) AS n,
              to_timestamp({origin} + floor((epoch(min(event_time)) - {origin})
                                            / {a.bucket_seconds}) * {a.bucket_seconds}) AS bucket
            FROM {tier} GROUP BY id""")
    answer: dict[str, Any] = {"reads": reads, "hops": {}}
    for up, down in HOPS:
        before = ["upstream"] if up == "upstream" else ["upstream", "topic"]
        kinds = {
            "missing": f"SELECT u.id, u.bucket, 1 AS v FROM ids_{up} u ANTI JOIN ids_{down} d "
                       f"USING (id)",
            "unexpected": f"SELECT d.id, d.bucket, 1 AS v FROM ids_{down} d "
                          + " ".join(f"ANTI JOIN ids_{b} USING (id)" for b in before),
            "duplicate": f"SELECT d.id, d.bucket, d.n - greatest(coalesce(u.n, 1), 1) AS v "
                         f"FROM ids_{down} d LEFT JOIN ids_{up} u USING (id) "
                         f"WHERE d.n > greatest(coalesce(u.n, 1), 1)",
        }
        hop: dict[str, Any] = {}
        for kind, sql in kinds.items():
            target = out / kind / f"{up}__{down}.csv"
            target.parent.mkdir(parents=True, exist_ok=True)
            cols = "id, v AS extra" if kind == "duplicate" else "id"
            run(f"COPY (SELECT {cols} FROM ({sql}) ORDER BY id) TO '{target}' "
                "(HEADER, DELIMITER ',')")
            per = run(f"SELECT strftime(bucket, '%Y-%m-%dT%H:%M:%SZ'), sum(v) "
                      f"FROM ({sql}) GROUP BY 1")
            hop[kind] = {"total": sum(int(v) for _, v in per),
                         "buckets": {b: int(v) for b, v in per}}
        answer["hops"][f"{up}->{down}"] = hop
    answer["seconds"] = round(time.monotonic() - t0, 3)
    (out / "answer.json").write_text(json.dumps(answer, indent=2))
    print(json.dumps({k: {kk: v["total"] for kk, v in h.items()}
                      for k, h in answer["hops"].items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
