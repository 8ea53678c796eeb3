"""Run drill scenarios: set up, act (apps and faults), reconcile, compare with the truth.

A scenario passes when the reconciliation's findings (kind, side, hop, count and id set) equal
the truth's exactly, the truth holds what the scenario is about (else the fault "did not bite"
and the attempt is re-run, never counted), and the status is the one the scenario expects.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from harness.drill import ledger
from harness.drill.faults import app_state, wait_for
from harness.drill.truth import (
    Key,
    Truth,
    expected_findings,
    sql_ids,
    sql_time,
    table_ids,
    topic_ids,
    url_ids,
)
from harness.services.kafka import KafkaCluster
from kafka_recon import orchestrate
from kafka_recon.errors import TopicError
from kafka_recon.result.model import Result

SAFE_PRODUCER = {"acks": "all", "enable.idempotence": True, "linger.ms": 5}
# the group protocol's debug log goes to each consumer's log file: the evidence when a consumer
# stalls in a rebalance
CONSUMER_BASE = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000, "debug": "cgrp"}
# a drill cluster's followers fall out of the ISR after 5 s instead of 30 s
CLUSTER_CONFIG = {"replica.lag.time.max.ms": "5000"}
FLOW = """
flows:
{flows}
"""
FLOW_ONE = """  {name}:
    owners: [drill@example.com]
    bucket: {bucket}
    grace: {grace}s{disorder}
    replays: 2
    record: {{id: "$.id", event_time: "$.ts"}}
    tiers:
      - name: db
        type: sql
        conn: "{up}"
        ids: "SELECT id, ts AS event_time FROM src WHERE ts >= :start AND ts < :end"
{extra_tiers}      - name: topic
        type: kafka
        {kafka_at}
        topic: "{topic}"
        consumer_groups: [{group}]
{after_topic}{sink_tier}"""
SQL_SINK = """      - name: {sink}
        type: sql
        conn: "sqlite:///{down}"
        ids: "SELECT id, ts AS event_time FROM dst WHERE ts >= :start AND ts < :end"
"""
TABLE_SINK = """      - name: {sink}
        type: table
        format: {format}
        table: "{down}"
        event_time: ts
"""


# the Airflow Kafka connection a secured drill's flows name (AIRFLOW_CONN_DRILL_KAFKA)
DRILL_CONN = "drill_kafka"


class NotBitten(RuntimeError):
    """The fault did not take effect: nothing to find, so nothing proven."""


RECORD_EVERY_S = 2.0


class FlightRecorder:
    """The flight recorder on a thread, snapshotting the scenario's topic and group every
    RECORD_EVERY_S into the attempt's snapshot store, as the scheduled `kafka-recon snapshot`
    does every five minutes in production. A snapshot that fails (a broker just died) is
    missed, as in production; the attempt's evidence says how many were taken."""

    def __init__(self, ctx: Ctx, flows: list[str]) -> None:
        import threading

        self.ctx, self.flows = ctx, flows
        self.taken = self.missed = 0
        self.first_at: datetime | None = None
        self.last_at: datetime | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        from kafka_recon.cluster import recorder
        from kafka_recon.errors import ReconError
        from kafka_recon.sources.kafka_client import KafkaEndpoint

        con = recorder.connect(self.ctx.folder / "snapshots.db")
        ep = KafkaEndpoint(self.ctx.bootstrap)
        while not self._stop.is_set():
            now = datetime.now(UTC)
            try:
                progress = self._mirror_progress()
                for flow in self.flows:
                    recorder.record(con, flow, self.ctx.topic, ep, [self.ctx.group], now,
                                    progress=progress)
                self.taken += 1
                self.first_at = self.first_at or now
                self.last_at = now
            except (ReconError, RuntimeError, OSError):
                self.missed += 1
            self._stop.wait(RECORD_EVERY_S)

    def _mirror_progress(self) -> dict[str, dict[int, int]]:
        """A mirrored scenario's MirrorMaker 2 progress, as `kafka-recon snapshot` records it
        for a flow whose mirrored tier names the mirror's properties."""
        from harness.services.mirror import SOURCE, TARGET
        from kafka_recon.cluster.mirror import mirror_group

        if self.ctx.target is None or not self.ctx.mirrors:
            return {}
        return {mirror_group(SOURCE, TARGET): self.ctx.mirror_progress()}

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


class App:
    """One drill app process, its ledger folder and its state file."""

    def __init__(self, role: str, folder: Path, spec: dict[str, Any],
                 module: str = "harness.drill.apps") -> None:
        self.role, self.folder, self.module = role, folder, module
        folder.mkdir(parents=True, exist_ok=True)
        self.spec = {**spec, "role": role, "ledger": str(folder / "ledger"),
                     "state": str(folder / "state.json")}
        self.state_path = folder / "state.json"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> App:
        (self.folder / "spec.json").write_text(json.dumps(self.spec, indent=2))
        log = open(self.folder / f"{self.role}-{self.starts}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", self.module, str(self.folder / "spec.json")],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.starts += 1
        return self

    @property
    def ledger(self) -> Path:
        return self.folder / "ledger"

    def count(self, event: str) -> int:
        return len(ledger.read(self.ledger, event))

    def state(self) -> dict[str, Any]:
        return app_state(self.state_path)

    def kill(self) -> None:
        """SIGKILL: the app dies mid-work, as in an OOM kill or a lost container."""
        assert self.proc
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self.state_path.unlink(missing_ok=True)

    def stop(self, timeout: float = 60) -> None:
        assert self.proc
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def wait(self, timeout: float = 300) -> int:
        assert self.proc
        return self.proc.wait(timeout)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class Ctx:
    """What a scenario's `act` works with: the cluster, its topic, its apps, its evidence."""

    cluster: KafkaCluster
    topic: str
    folder: Path
    sinks: dict[str, Path]
    group: str
    evidence: list[str] = field(default_factory=list)
    apps: list[App] = field(default_factory=list)
    upstream: Path = Path()
    window_start: datetime | None = None  # moved by a scenario whose tier starts later (Flume)
    window_end: datetime | None = None    # fixed by a scenario that needs it (late records)
    grace_s: int = 2
    disorder_s: int | None = None          # the flow's disorder margin (None: its default)
    bucket: str = "10s"
    flume: Any = None                     # S10's agent and snapshots: stopped after the window
    target: KafkaCluster | None = None    # a mirrored scenario's aggregate cluster (alias B)
    mirrors: list[Any] = field(default_factory=list)  # its MirrorMaker 2, stopped after the act
    mariadb: Any = None                   # the upstream's MariaDB server, when it is one

    @property
    def upstream_url(self) -> str:
        """The upstream table's database, as the flow's first tier names it."""
        return self.mariadb.url("up") if self.mariadb is not None else f"sqlite:///{self.upstream}"

    @property
    def processed(self) -> str:
        """The drill processor's output topic."""
        return f"{self.topic}-processed"

    def processor(self, **spec: Any) -> App:
        """The drill's processor: reads the topic, writes each record reshaped
        ({"order": {"id", "at"}}) to `processed`, committing as `commit` says."""
        return self.consumer(name="processor", forward_to=self.processed, **spec)

    @property
    def mirrored(self) -> str:
        """The mirror's copy of the topic on the target cluster (MirrorMaker 2's naming)."""
        from harness.services.mirror import mirrored

        return mirrored(self.topic)

    def mirror_progress(self) -> dict[int, int]:
        """The next source offset per partition the mirror would copy, from its offset store
        (`kafka_recon.cluster.mirror`, as a run reads it)."""
        from harness.services.mirror import SOURCE
        from kafka_recon.cluster.mirror import offsets_topic, progress
        from kafka_recon.sources.kafka_client import KafkaEndpoint

        assert self.target is not None
        return progress(KafkaEndpoint(self.target.bootstrap), offsets_topic({}, SOURCE),
                        SOURCE, self.topic)

    def mirror(self, **settings: Any) -> Any:
        """MirrorMaker 2 from the scenario's cluster to the target, for the scenario's topic."""
        from harness.services.mirror import MirrorMaker2

        assert self.target is not None, "a mirrored scenario runs with a target cluster"
        mm2 = MirrorMaker2(self.folder / "mm2", self.bootstrap, self.target.bootstrap,
                           self.topic, settings)
        self.mirrors.append(mm2)
        return mm2.start()

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def note(self, text: str) -> None:
        self.evidence.append(text)

    def producer(self, **spec: Any) -> App:
        config = {**SAFE_PRODUCER, **spec.pop("config", {})}
        app = App("producer", self.folder / "producer",
                  {"bootstrap": self.bootstrap, "topic": self.topic,
                   "upstream": str(self.upstream), "config": config, **spec})
        self.apps.append(app)
        return app.start()

    def consumer(self, sink: str = "sink", name: str | None = None, **spec: Any) -> App:
        config = {**CONSUMER_BASE, **spec.pop("config", {})}
        app = App("consumer", self.folder / (name or sink),
                  {"bootstrap": self.bootstrap, "topic": self.topic, "group": self.group,
                   "sink": str(self.sinks[sink]), "config": config, **spec})
        self.apps.append(app)
        return app.start()

    def drain(self, *consumers: App, timeout: float = 180) -> None:
        drain(*consumers, timeout=timeout)

    def streaming(self, sink: str = "sink", **spec: Any) -> App:
        """The drill's streaming writer (harness.drill.streaming): Spark's Kafka source into
        the sink's table, its checkpoint in its folder."""
        folder = self.folder / "streaming"
        app = App("streaming", folder,
                  {"bootstrap": self.bootstrap, "topic": self.topic,
                   "table": str(self.sinks[sink]), "checkpoint": str(folder / "checkpoint"),
                   "marker": str(folder / "held"), **spec}, module="harness.drill.streaming")
        self.apps.append(app)
        return app.start()


def drain(*consumers: App, timeout: float = 180) -> None:
    """Let consumers catch up with the topic's end, then stop them cleanly. When they do not,
    the error carries what each app and the cluster said, so the matrix shows why."""
    from harness.drill.faults import FaultError

    def caught_up() -> bool:
        states = [c.state() for c in consumers]
        return all(s.get("caught_up") for s in states)
    try:
        wait_for("the consumers to reach the end of the topic", caught_up, timeout)
    except FaultError as exc:
        raise FaultError(f"{exc}: {stall_evidence(consumers)}") from None
    counts = [c.state().get("processed") for c in consumers]
    time.sleep(1.0)  # settled: nothing more processed in a second
    while [c.state().get("processed") for c in consumers] != counts:
        counts = [c.state().get("processed") for c in consumers]
        time.sleep(1.0)
    for c in consumers:
        c.stop()


def stall_evidence(consumers: tuple[App, ...]) -> str:
    """Each consumer's process, state file, last processed offsets and log tail, against the
    topic's end offsets, leaders and the group's commits as the brokers hold them."""
    from confluent_kafka import Consumer, TopicPartition

    from kafka_recon.sources.kafka_client import KafkaEndpoint
    from kafka_recon.sources.topic import committed_offsets

    parts = []
    for c in consumers:
        done = ledger.last_offsets(c.ledger)
        logs = sorted(c.folder.glob(f"{c.role}-*.log"))
        tail = logs[-1].read_text(errors="replace").splitlines()[-8:] if logs else []
        parts.append(f"app {c.folder.name}: running={c.running()}, exit="
                     f"{c.proc.poll() if c.proc else None}, state={c.state()}, processed up to "
                     f"{done}, log tail {tail}")
    spec = consumers[0].spec if consumers else {}
    try:
        from harness.drill.faults import admin

        md = admin(spec["bootstrap"]).list_topics(spec["topic"], timeout=5).topics[spec["topic"]]
        ep = KafkaEndpoint(spec["bootstrap"])

        probe = Consumer({"bootstrap.servers": spec["bootstrap"], "group.id": "drill-probe"})
        ends = {p: probe.get_watermark_offsets(TopicPartition(spec["topic"], p), timeout=5)[1]
                for p in md.partitions}
        probe.close()
        leaders = {p: (m.leader, list(m.isrs)) for p, m in md.partitions.items()}
        commits = committed_offsets(ep, spec["topic"], [spec["group"]], sorted(md.partitions))
        parts.append(f"topic ends {ends}, leaders and ISR {leaders}, group commits {commits}")
    except Exception as exc:  # noqa: BLE001 - evidence is best effort; the failure stands
        parts.append(f"cluster state unreadable: {exc}")
    return "; ".join(parts)


Act = Callable[[Ctx], None]
Bite = Callable[[Ctx, Truth], str | None]  # None: the fault bit; else why it did not


@dataclass
class Scenario:
    id: str
    title: str
    seeds: str
    expected: list[Key]          # (kind, side, hop); the hop's sink part is {sink}
    act: Act
    rows: int = 2000
    partitions: int = 1
    replication: int = 3
    topic_config: dict[str, str] = field(default_factory=dict)
    sinks: tuple[str, ...] = ("sink",)
    status: str = "findings"
    # the true cause of each expected finding, in the same order (None: no cause, as for late)
    causes: tuple[str | None, ...] = ()
    write_hop: str = "db->topic"
    bite: Bite | None = None
    extra_tiers: Callable[[Ctx], str] | None = None
    mirror: bool = False  # the flow runs on through MirrorMaker 2's copy on a second cluster
    processor: bool = False  # ... or through a processor's output topic on the same cluster
    # the sink is a table a streaming job writes (its format), not the consumer's SQL table
    sink_format: str | None = None
    # where the upstream table is: SQLite, or a MariaDB server of the attempt's own (its rows
    # then come from the act, AUTO_INCREMENT ids)
    upstream: str = "sqlite"
    # the truth when a plain read of the topic cannot tell it (retention deleted the records)
    truth: Callable[[Ctx, Truth], dict[str, dict[Key, dict[str, Any]]]] | None = None
    # once judged, the window is repaired through Airflow (harness.drill.repair)
    repair: bool = False
    # an inconclusive scenario: the code its run's reason must name (docs/causes.md, "Why a
    # window is not judged")
    reason: str | None = None


# ---------------------------------------------------------------------- one attempt
def _setup(sc: Scenario, cluster: KafkaCluster, folder: Path,
           target: KafkaCluster | None = None) -> Ctx:
    from confluent_kafka.admin import NewTopic

    from harness.drill.faults import admin

    topic = f"drill-{sc.id.lower()}-{uuid.uuid4().hex[:8]}"
    config = {"min.insync.replicas": "1", **sc.topic_config}
    client = admin(cluster.bootstrap)  # referenced until the futures resolve
    futures = client.create_topics(
        [NewTopic(topic, sc.partitions, sc.replication, config=config)]
        + ([NewTopic(f"{topic}-processed", sc.partitions, sc.replication,
                     config={"min.insync.replicas": "1"})] if sc.processor else []))
    for fut in futures.values():
        fut.result(30)
    folder.mkdir(parents=True, exist_ok=True)
    sinks = {name: folder / (f"{name}.{sc.sink_format}" if sc.sink_format else f"{name}.db")
             for name in sc.sinks}
    for path in sinks.values() if not sc.sink_format else []:
        _exec(path, "CREATE TABLE dst (id INTEGER, ts TEXT)")  # no key: duplicates land
    ctx = Ctx(cluster, topic, folder, sinks, group=f"loader-{topic}",
              upstream=folder / "upstream.db", target=target if sc.mirror else None)
    if cluster.security is not None:
        from harness.services.kafka_security import grant, reader_acls

        grant(cluster.bootstrap, "recon", reader_acls(topic, [ctx.group]))
        if sc.repair:  # what a repair adds (docs/repair.md, "ACLs")
            repair = f"{topic}.kafka-recon-repair"
            grant(cluster.bootstrap, "recon", [
                ("TOPIC", repair, "LITERAL", op) for op in ("CREATE", "READ", "WRITE")] + [
                ("TRANSACTIONAL_ID", "kafka-recon-repair-", "PREFIXED", "WRITE")])
    if sc.upstream == "mariadb":
        from harness.services.mariadb import MariaDBServer

        ctx.mariadb = MariaDBServer(folder / "mariadb").start()
        ctx.mariadb.create_database("up")
        ctx.mariadb.sql("CREATE TABLE src (id BIGINT AUTO_INCREMENT PRIMARY KEY, "
                        "ts DATETIME NOT NULL)", "up")
    else:
        _exec(ctx.upstream, "CREATE TABLE src (id INTEGER PRIMARY KEY, ts TEXT)")
    return ctx


def _exec(path: Path, sql: str, rows: list[tuple[Any, ...]] | None = None) -> None:
    con = sqlite3.connect(path)
    with con:
        con.executemany(sql, rows) if rows else con.execute(sql)
    con.close()


def _ceil_second(t: datetime) -> datetime:
    return t.replace(microsecond=0) + timedelta(seconds=1 if t.microsecond else 0)


def _flow_name(sc: Scenario, sink: str) -> str:
    """One flow per sink: named after it when there are several, else `drill`."""
    return sink if len(sc.sinks) > 1 else "drill"


def _write_config(sc: Scenario, ctx: Ctx) -> Path:
    flows = []
    for sink in sc.sinks:
        flows.append(FLOW_ONE.format(
            name=_flow_name(sc, sink), grace=ctx.grace_s, up=ctx.upstream_url,
            disorder=f"\n    disorder: {ctx.disorder_s}s" if ctx.disorder_s else "",
            bucket=ctx.bucket,
            kafka_at=f'conn: "{DRILL_CONN}"' if ctx.cluster.security else
            f'bootstrap: "{ctx.bootstrap}"', topic=ctx.topic, group=ctx.group,
            sink_tier=(TABLE_SINK.format(sink=sink, format=sc.sink_format, down=ctx.sinks[sink])
                       if sc.sink_format else SQL_SINK.format(sink=sink, down=ctx.sinks[sink])),
            extra_tiers=sc.extra_tiers(ctx) if sc.extra_tiers else "",
            after_topic=(_mirrored_tier(ctx) if ctx.target is not None else "")
            + (_processed_tier(ctx) if sc.processor else "")))
    text = FLOW.format(flows="".join(flows))
    if sc.repair:
        from harness.drill.repair import REPAIR_BLOCK

        text = text.replace("    replays: 2\n", "    replays: 2\n" + REPAIR_BLOCK)
    path = ctx.folder / "flows.yaml"
    path.write_text(text)
    return path


def _mirrored_tier(ctx: Ctx) -> str:
    assert ctx.target is not None
    props = f'\n        mirror_properties: "{ctx.mirrors[0].properties}"' if ctx.mirrors else ""
    return (f"      - name: mirrored\n        type: kafka\n        via: replication\n"
            f'        bootstrap: "{ctx.target.bootstrap}"\n        topic: "{ctx.mirrored}"'
            f"{props}\n")


def _processed_tier(ctx: Ctx) -> str:
    at = f'conn: "{DRILL_CONN}"' if ctx.cluster.security else f'bootstrap: "{ctx.bootstrap}"'
    return (f"      - name: processed\n        type: kafka\n        via: process\n"
            f'        {at}\n        topic: "{ctx.processed}"\n'
            f'        record: {{id: "$.order.id", event_time: "$.order.at"}}\n')


def _read_ids(out: Path, relative: str | None) -> set[int] | None:
    if not relative:
        return None
    with (out / relative).open() as fh:
        return {int(r["id"]) for r in csv.DictReader(fh)}


def found_findings(result: Result, out: Path) -> dict[Key, dict[str, Any]]:
    found: dict[Key, dict[str, Any]] = {}
    for f in result.record_findings:
        code = f.cause if isinstance(f.cause, str) or f.cause is None else f.cause.code
        hop = f.hop + (" (retention)" if code == "retention_deleted_unread" else "")
        found[(f.kind, f.side, hop)] = {
            "count": f.count, "ids": _read_ids(out, f.ids), "cause": code,
            "confidence": None if isinstance(f.cause, str) or f.cause is None
            else f.cause.confidence}
    return found


def compare_causes(wanted: dict[Key, str | None], found: dict[Key, dict[str, Any]]
                   ) -> list[str]:
    """The cause each expected finding must carry (None: it must name none)."""
    problems = []
    for key, code in sorted(wanted.items()):
        f = found.get(key)
        if f is not None and f.get("cause") != code:
            problems.append(f"{'/'.join(key)}: cause {f.get('cause') or 'none'}, expected "
                            f"{code or 'none'}")
    return problems


def compare(expected: dict[Key, dict[str, Any]], found: dict[Key, dict[str, Any]]
            ) -> list[str]:
    """Every difference between the truth and the reconciliation, in words ([] when equal)."""
    problems = []
    for key in sorted(set(expected) | set(found)):
        e, f = expected.get(key), found.get(key)
        name = "/".join(key)
        if f is None:
            problems.append(f"{name}: {e['count'] if e else 0} in truth, not reported")
        elif e is None:
            problems.append(f"{name}: reported {f['count']}, truth has none")
        elif e["count"] != f["count"]:
            problems.append(f"{name}: reported {f['count']}, truth {e['count']}")
        elif f["ids"] is None:
            problems.append(f"{name}: no id file reported")
        elif f["ids"] != e["ids"]:
            problems.append(f"{name}: id sets differ ({len(f['ids'] - e['ids'])} reported "
                            f"not in truth, {len(e['ids'] - f['ids'])} in truth not reported)")
    return problems


def _cause_evidence(result: Result) -> list[str]:
    out = []
    for f in result.record_findings:
        if f.cause is not None and not isinstance(f.cause, str):
            out.append(f"{f.kind}/{f.side}/{f.hop}: {f.cause.code} ({f.cause.confidence}): "
                       f"{f.cause.summary}; " + "; ".join(f.cause.evidence))
    return out


def audit_summary(result: Result) -> list[str]:
    return sorted({f"{f.rule} ({f.severity})" for f in result.risks})


def attempt(sc: Scenario, cluster: KafkaCluster, spark: Any, folder: Path,
            target: KafkaCluster | None = None, desk: Any = None) -> dict[str, Any]:
    """One run of a scenario; NotBitten when the fault did not take effect. With `desk`
    (harness.drill.repair), a scenario marked `repair` is then repaired through Airflow."""
    ctx = _setup(sc, cluster, folder, target)
    try:
        return _judged(sc, ctx, spark, folder, desk if sc.repair else None)
    finally:
        if ctx.mariadb is not None:
            ctx.mariadb.stop()


def _judged(sc: Scenario, ctx: Ctx, spark: Any, folder: Path, desk: Any = None
            ) -> dict[str, Any]:
    """The scenario's act on its prepared tiers, then the runs judged against the truth."""
    cluster = ctx.cluster
    # the store the run's stage step reads the recorder from (and S10's Flume counters)
    os.environ["KAFKA_RECON_SNAPSHOTS"] = str(folder / "snapshots.db")
    flight = FlightRecorder(ctx, [_flow_name(sc, sink) for sink in sc.sinks])
    wait_for("the flight recorder's first snapshot", lambda: flight.taken, 60)
    # the window starts after the recorder's first snapshot, as a scheduled recorder's
    # snapshots bracket a production window
    start = _ceil_second(datetime.now(UTC))
    time.sleep(max(0.0, (start - datetime.now(UTC)).total_seconds()))
    created = datetime.now(UTC)
    if ctx.mariadb is None:
        _exec(ctx.upstream, "INSERT INTO src VALUES (?, ?)",
              [(i, sql_time(created)) for i in range(1, sc.rows + 1)])
    try:
        try:
            sc.act(ctx)
        except Exception as exc:
            exc.evidence = ctx.evidence  # type: ignore[attr-defined]  # what the act saw
            raise
        finally:
            for app in ctx.apps:
                if app.running():
                    app.stop(10)
            for mm2 in ctx.mirrors:
                mm2.stop()
            for node, alive in cluster.running().items():
                cluster.resume(node)  # a paused follower left behind would freeze the next one
                if not alive:  # a fault left a broker down: bring it back for the next one
                    cluster.restart(node)
        start = ctx.window_start or start
        end = ctx.window_end or _ceil_second(datetime.now(UTC)) + timedelta(seconds=1)
        closes = end + timedelta(seconds=ctx.grace_s)
        wait = (closes - datetime.now(UTC)).total_seconds() + 1.5
        if wait > 0:
            time.sleep(wait)  # the window must be closed before it is judged
        # and the recorder must have seen past its close, as a scheduled one would have
        wait_for("a flight recorder snapshot after the window closed",
                 lambda: flight.last_at is not None and flight.last_at >= closes, 60)
    finally:
        flight.stop()
        ctx.note(f"flight recorder: {flight.taken} snapshot(s) every {RECORD_EVERY_S:.0f}s, "
                 f"{flight.missed} missed")
        if ctx.flume is not None:
            ctx.flume.stop()
    up = url_ids(ctx.upstream_url, "src", start, end) if ctx.mariadb is not None \
        else sql_ids(str(ctx.upstream), "src", start, end)
    tp, late = topic_ids(ctx.bootstrap, ctx.topic, start, end, closes)
    truth = Truth(up, tp, late, {s: table_ids(p, start, end) if sc.sink_format
                                 else sql_ids(str(p), "dst", start, end)
                                 for s, p in ctx.sinks.items()})
    if ctx.target is not None:  # the mirror's copy, read as plainly as the topic
        truth.chain.append(("mirrored", "replication", topic_ids(
            ctx.target.bootstrap, ctx.mirrored, start, end, closes)[0]))
    if sc.processor:
        truth.chain.append(("processed", "process", topic_ids(
            ctx.bootstrap, ctx.processed, start, end, closes)[0]))
    expected = sc.truth(ctx, truth) if sc.truth else expected_findings(truth, sc.write_hop)
    config = _write_config(sc, ctx)
    flows: list[dict[str, Any]] = []
    for sink in sc.sinks:
        flow_name = _flow_name(sc, sink)
        # a window to repair is run where the repair DAG's tasks find it
        out = desk.folder(flow_name, start.isoformat(), end.isoformat(), config) \
            if desk is not None else folder / f"run-{flow_name}"
        run = orchestrate.load(flow_name, start.isoformat(), end.isoformat(), config, out)
        try:
            result = orchestrate.execute(run, spark, with_report=False)
        except TopicError:  # a step that could not see the topic: its inconclusive result
            result = Result.load(run.folder.result)
        want = expected[sink]
        found = found_findings(result, out)
        causes = {(k, s_, h.format(sink=sink)): c
                  for (k, s_, h), c in zip(sc.expected, sc.causes, strict=True)}
        flows.append({"flow": flow_name, "status": result.status,
                      "reasons": result.reasons, "audit": audit_summary(result),
                      "truth": {"/".join(k): v["count"] for k, v in want.items()},
                      "found": {"/".join(k): v["count"] for k, v in found.items()},
                      "causes": {"/".join(k): v["cause"] and f"{v['cause']} ({v['confidence']})"
                                 for k, v in found.items()},
                      "cause_evidence": _cause_evidence(result),
                      "problems": compare(want, found) + compare_causes(causes, found)})
    wanted = {(k, s, h.format(sink=sink)) for sink in sc.sinks for k, s, h in sc.expected}
    truth_keys = {k for sink in sc.sinks for k in expected[sink]}
    why_not = sc.bite(ctx, truth) if sc.bite else None
    if wanted - truth_keys or why_not:
        missing = ", ".join("/".join(k) for k in sorted(wanted - truth_keys))
        bitten = NotBitten(why_not or f"the truth holds no {missing}")
        bitten.evidence = ctx.evidence  # type: ignore[attr-defined]  # what the act saw
        raise bitten
    repaired = None
    if desk is not None and not any(f["problems"] for f in flows):
        from harness.drill.repair import repair_window

        [sink] = sc.sinks
        lost = {i for k, v in expected[sink].items() if k[0] == "loss" for i in v["ids"]}
        repaired = repair_window(desk, ctx, config, _flow_name(sc, sink), start.isoformat(),
                                 end.isoformat(), lost)
        if not repaired["bitten"]:
            bitten = NotBitten("the repair's delivery had committed everything when killed")
            bitten.evidence = ctx.evidence + repaired["notes"]  # type: ignore[attr-defined]
            raise bitten
    return {"window": {"start": start.isoformat(), "end": end.isoformat()},
            "repair": repaired,
            "upstream": len(up), "topic": sum(tp.values()),
            "sinks": {s: sum(c.values()) for s, c in truth.sinks.items()},
            "flows": flows, "evidence": ctx.evidence, "extra_truth": sorted(
                "/".join(k) for k in truth_keys - wanted)}


def run_scenario(sc: Any, cluster: KafkaCluster, spark: Any, out: Path,
                 attempts: int = 3, label: str | None = None,
                 target: KafkaCluster | None = None, desk: Any = None,
                 attempt_in: Callable[[Path], dict[str, Any]] | None = None) -> dict[str, Any]:
    """A scenario's row of the matrix: re-run while its fault does not bite. `attempt_in`:
    how one attempt runs in its folder, for a scenario that is no `Scenario` (the connector
    scenarios, harness.drill.connect)."""
    label = label or sc.id
    row: dict[str, Any] = {"scenario": label, "title": sc.title, "seeds": sc.seeds,
                           "expected": _expected_words(sc), "cause": _cause_words(sc),
                           "attempts": [], "result": "fail"}
    for n in range(1, attempts + 1):
        began = time.monotonic()
        folder = out / label / f"attempt-{n}"
        try:
            got = attempt_in(folder) if attempt_in is not None \
                else attempt(sc, cluster, spark, folder, target, desk)
        except NotBitten as exc:
            row["attempts"].append({"n": n, "outcome": "fault did not bite", "why": str(exc),
                                    "evidence": getattr(exc, "evidence", []),
                                    "seconds": round(time.monotonic() - began, 1)})
            continue
        except Exception as exc:  # noqa: BLE001 - a broken attempt is a failed row, not a crash
            row["attempts"].append({"n": n, "outcome": "error",
                                    "why": f"{type(exc).__name__}: {exc}",
                                    "evidence": getattr(exc, "evidence", []),
                                    "seconds": round(time.monotonic() - began, 1)})
            break
        statuses = sorted({f["status"] for f in got["flows"]})
        problems = [p for f in got["flows"] for p in f["problems"]]
        if statuses != [sc.status]:
            problems.append(f"status {'/'.join(statuses)}, expected {sc.status}")
        # an inconclusive scenario's reason, named by each flow's run
        named = [any(f"({sc.reason}" in r for r in f["reasons"]) for f in got["flows"]] \
            if sc.reason else []
        if sc.reason and not all(named):
            problems.append(f"no reason names {sc.reason}")
        if desk is not None and sc.repair:
            if got.get("repair") is None:
                problems.append("not repaired: the window was not judged right")
            else:
                problems += [f"repair: {p}" for p in got["repair"]["problems"]]
        got.update(n=n, outcome="pass" if not problems else "fail", problems=problems,
                   seconds=round(time.monotonic() - began, 1))
        row["attempts"].append(got)
        row["result"] = got["outcome"]
        row["found"] = _found_words(got)
        row["found_cause"] = "; ".join(c or "none" for f in got["flows"]
                                       for c in f["causes"].values()) or (
            f"{sc.reason} (reason)" if any(named) else "none")
        break
    else:
        row["result"] = "fault did not bite"
    row.setdefault("found", "-")
    row.setdefault("found_cause", "-")
    return row


def _expected_words(sc: Scenario) -> str:
    if not sc.expected:
        return "nothing" + (f" (status {sc.status})" if sc.status != "ok" else "")
    sink = sc.sinks[0] if len(sc.sinks) == 1 else "each sink"
    words = "; ".join(f"{k}, {s} side, {h.format(sink=sink)}" for k, s, h in sc.expected)
    if sc.repair:
        words += "; then repaired: re-run ok, each lost id once in the sink"
    return words + (" (status inconclusive)" if sc.status == "inconclusive" else "")


def _cause_words(sc: Scenario) -> str:
    return "; ".join(c or "none" for c in sc.causes) or (
        f"{sc.reason} (reason)" if sc.reason else "none")


def _found_words(got: dict[str, Any]) -> str:
    parts = []
    for f in got["flows"]:
        items = [f"{k.replace('/', ', ', 2)}: {n}" for k, n in sorted(f["found"].items())]
        parts.append(("; ".join(items) or "nothing") + f" [{f['status']}]")
    repaired = got.get("repair")
    if repaired is not None:
        parts.append(f"repaired {repaired['repaired']}: " + (
            "re-run ok, each once in the sink" if not repaired["problems"]
            else "; ".join(repaired["problems"])))
    return " — ".join(parts)


def pick(scenarios: dict[str, Scenario], wanted: list[str] | None) -> list[Scenario]:
    if not wanted:
        return list(scenarios.values())
    unknown = [w for w in wanted if w.upper() not in scenarios]
    if unknown:
        raise ValueError(f"unknown scenario(s) {', '.join(unknown)}; known: "
                         f"{', '.join(scenarios)}")
    return [scenarios[w.upper()] for w in wanted]

