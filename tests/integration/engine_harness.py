"""A flow on a real broker and SQLite tables, reconciled in process (stage, replay, reconcile).

Each scenario gets its own topic and databases; records are produced with chosen Kafka
timestamps so a closed window two days ago can be filled now.
"""

from __future__ import annotations

import csv
import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from harness.services.kafka import StageProducer
from kafka_recon import orchestrate

DAY = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=2)
START, END = DAY, DAY + timedelta(days=1)

FLOW = """
flows:
  f:
    owners: [owner@example.com]
    bucket: 1h
    grace: 10m
    replays: 2
    record: {{id: "$.id", event_time: "$.ts"}}
    tiers:
      - name: db
        type: sql
        conn: "{up}"
        ids: "SELECT id, ts AS event_time FROM src WHERE ts >= :start AND ts < :end"
      - name: topic
        type: kafka
        bootstrap: "{bootstrap}"
        topic: "{topic}"
        consumer_groups: [{groups}]
      - name: sink
        type: sql
        conn: "{down}"
        ids: "SELECT id, ts AS event_time FROM dst WHERE ts >= :start AND ts < :end"
"""


def _time_type(url: str) -> str:
    """A time column in the database of `url` (SQLite keeps times as text)."""
    if url.startswith("postgres"):
        return "TIMESTAMP"
    return "DATETIME" if url.startswith(("mysql", "mariadb")) else "TEXT"


def at(minutes: float) -> datetime:
    return START + timedelta(minutes=minutes)


def text(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S")


@dataclass
class Scenario:
    tmp: Path
    bootstrap: str
    partitions: int = 3
    groups: list[str] = field(default_factory=list)
    up_url: str | None = None     # SQLAlchemy URLs; SQLite files in tmp when not given
    down_url: str | None = None
    kafka_conn: str | None = None  # the kafka tier names this connection, not `bootstrap`
    origin: datetime = START  # where flow_through's records begin (START: the test window)

    def __post_init__(self) -> None:
        self.topic = f"scn-{uuid.uuid4().hex[:10]}"
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for fut in admin.create_topics([NewTopic(self.topic, self.partitions, 1)]).values():
            fut.result(30)
        self.up, self.down = self.tmp / "up.db", self.tmp / "down.db"
        self.up_url = self.up_url or f"sqlite:///{self.up}"
        self.down_url = self.down_url or f"sqlite:///{self.down}"
        self._sql(self.up_url,
                  f"CREATE TABLE src (id INTEGER PRIMARY KEY, ts {_time_type(self.up_url)})")
        # dups possible
        self._sql(self.down_url, f"CREATE TABLE dst (id INTEGER, ts {_time_type(self.down_url)})")
        self.config = self.tmp / "flows.yaml"
        self.config.write_text(FLOW.format(up=self.up_url, down=self.down_url,
                                           bootstrap=self.bootstrap, topic=self.topic,
                                           groups=", ".join(self.groups)))
        if self.kafka_conn:
            self.config.write_text(self.config.read_text().replace(
                f'bootstrap: "{self.bootstrap}"', f'conn: "{self.kafka_conn}"'))
        self.producer = StageProducer(self.bootstrap, {"linger.ms": 5})

    # --- the tiers
    @staticmethod
    def _sql(url: str, statement: str, rows: list[dict[str, Any]] | None = None) -> None:
        from sqlalchemy import create_engine
        from sqlalchemy import text as sql

        from kafka_recon.sources.connections import resolve

        engine = create_engine(resolve(url))
        with engine.begin() as con:
            con.execute(sql(statement), rows) if rows else con.execute(sql(statement))
        engine.dispose()

    def upstream(self, rows: dict[int, datetime]) -> None:
        assert self.up_url
        self._sql(self.up_url, "INSERT INTO src VALUES (:i, :t)",
                  [{"i": i, "t": text(t)} for i, t in rows.items()])

    def sink(self, rows: list[tuple[int, datetime]]) -> None:
        assert self.down_url
        self._sql(self.down_url, "INSERT INTO dst VALUES (:i, :t)",
                  [{"i": i, "t": text(t)} for i, t in rows])

    def flow_through(self, n: int, sink_lacks: set[int] | frozenset[int] = frozenset(),
                     every: float = 1.0) -> dict[int, datetime]:
        """Ids 1..n upstream and in the topic (one each `every` minutes into the window), and
        in the sink all but `sink_lacks`: a flow that lost those on the consume side."""
        rows = {i: self.origin + timedelta(minutes=i * every) for i in range(1, n + 1)}
        self.upstream(rows)
        self.produce(list(rows.items()))
        self.sink([(i, t) for i, t in rows.items() if i not in sink_lacks])
        return rows

    def produce(self, rows: list[tuple[int, datetime]], arrival: datetime | None = None,
                partition: int | None = None, producer: Any = None,
                headers: dict[int, list[tuple[str, bytes]]] | None = None) -> None:
        p = producer or self.producer
        for i, t in rows:
            value = json.dumps({"id": i, "ts": t.strftime("%Y-%m-%dT%H:%M:%SZ")})
            kw: dict[str, Any] = {"partition": partition} if partition is not None else {}
            if headers and i in headers:
                kw["headers"] = headers[i]
            p.produce(self.topic, key=str(i), value=value,
                      timestamp=int((arrival or t).timestamp() * 1000), **kw)
        if producer is None:
            p.flush()

    # --- the run
    def reconcile(self, spark: Any) -> dict[str, Any]:
        self.out = self.tmp / "run"
        run = orchestrate.load("f", START.isoformat(), END.isoformat(), self.config, self.out)
        return orchestrate.execute(run, spark, with_report=False).as_json()

    def avro_through_registry(self, name: str) -> Any:
        """The flow's records become the registry's Avro, read through a fresh in-process
        registry (`mock://<name>-...`): its client, where the test registers schemas."""
        from kafka_recon.sources import registry

        url = f"mock://{name}-{uuid.uuid4().hex[:8]}"
        self.config.write_text(self.config.read_text().replace(
            'record: {id: "$.id", event_time: "$.ts"}',
            'record: {id: "$.id", event_time: "$.ts", format: avro}').replace(
            f'topic: "{self.topic}"', f'topic: "{self.topic}"\n        schema_registry: "{url}"'))
        return registry.client({"url": url})

    def produce_raw(self, records: list[tuple[bytes | None, bytes | None, datetime]],
                    partition: int = 0) -> None:
        """Records exactly as given (key, value, Kafka timestamp): any shape a topic holds."""
        for key, value, t in records:
            self.producer.produce(self.topic, key=key, value=value, partition=partition,
                                  timestamp=int(t.timestamp() * 1000))
        self.producer.flush()

    def texts(self, relative: str | None, column: str = "id") -> list[str]:
        """An id file read back by Python's csv module, as a spreadsheet or COPY would."""
        assert relative, "the finding names no id file"
        with (self.out / relative).open(newline="", encoding="utf-8") as fh:
            return [r[column] for r in csv.DictReader(fh)]

    def ids(self, relative: str | None) -> set[int]:
        return {int(i) for i in self.texts(relative)}


def commit_offset(bootstrap: str, group: str, topic: str, partition: int, offset: int) -> None:
    """Commit a group's offset as its application would, once the group coordinator answers
    (it moves while a broker restarts, and loads on a fresh broker)."""
    import time

    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    waiting = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
               KafkaError.COORDINATOR_NOT_AVAILABLE}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                consumer.commit(offsets=[TopicPartition(topic, partition, offset)],
                                asynchronous=False)
                return
            except KafkaException as exc:
                if exc.args[0].code() not in waiting or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def findings(result: dict[str, Any]) -> list[tuple[str, str, str, int]]:
    """The reconciliation's findings (the audit's config_risk and health ones aside)."""
    return sorted((f["kind"], f["side"], f["hop"], f["count"]) for f in result["findings"]
                  if f["kind"] not in ("config_risk", "health"))
