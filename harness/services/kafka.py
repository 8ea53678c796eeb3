"""Apache Kafka in KRaft mode on loopback: one node, or a three-broker cluster for fault drills.

Each node runs broker and controller in one JVM (combined mode), with its own ports and log dir.
State (ports, pids, cluster id) is kept in `<dir>/cluster.json`, so a later command line
invocation can kill or restart a broker of a cluster that an earlier one started.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.services.base import (
    Service,
    ServiceError,
    java_binary,
    pid_alive,
    signal_group,
    wait_dead,
)
from harness.services.kafka_security import Security
from harness.services.ports import HOST, ensure_free, free_port, wait_open
from kafka_recon.settings import kafka_classpath

STATE_FILE = "cluster.json"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0

_LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.state.name = state.change.logger
logger.state.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""


class KafkaStartError(ServiceError):
    pass


def new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass
class NodeState:
    node_id: int
    port: int
    controller_port: int
    pid: int | None = None
    sasl_port: int | None = None   # SASL_SSL and SSL (mTLS) listeners of a secured cluster
    ssl_port: int | None = None


@dataclass
class ClusterState:
    cluster_id: str
    nodes: list[NodeState]
    broker_config: dict[str, str] = field(default_factory=dict)
    security_dir: str | None = None


class KafkaCluster(Service):
    """A KRaft cluster of `size` combined nodes on 127.0.0.1.

    `size=1` is the single node of the demo and of most tests (formatted `--standalone`);
    `size=3` is the cluster of the drills (a static quorum of three voters).
    """

    def __init__(
        self,
        base_dir: Path | str,
        size: int = 1,
        ports: list[int] | None = None,
        broker_config: Mapping[str, str] | None = None,
        heap: str = "512m",
        security: Security | None = None,
        host: str = HOST,
        lean: bool | None = None,
    ) -> None:
        """`host`: the address every listener binds and advertises (loopback; a lab's bridge
        address for hosts in network namespaces, harness.services.lab). `lean`: a broker for
        small data (tests, the demo): the JIT's first tier only and internal topics of two
        partitions, not fifty. Measured on one idle broker (2026-11-27): 4.4 s of CPU to start
        against 6.6-8.0, 0.7 s to create the first consumer group against 2.1, 1.9 s a minute
        idle against 3.5; `make test` starts about twenty. By default only a single broker is:
        a three-broker cluster is there for its faults, and with lean brokers a drill's consumer
        group waited out its 180 s for an assignment after a leader was killed. The bench turns
        it off: its brokers serve millions of records, where the compiler's second tier pays."""
        if size not in (1, 3):
            raise ValueError(f"cluster size must be 1 or 3, got {size}")
        if ports is not None and len(ports) != size:
            raise ValueError(f"{size} node(s) need {size} port(s), got {ports}")
        self.base_dir = Path(base_dir).resolve()
        self.size = size
        self._ports = ports
        self._broker_config = dict(broker_config or {})
        self.heap = heap
        self.lean = size == 1 if lean is None else lean
        self.host = host
        self.state: ClusterState | None = self._load_state()
        self.security = security or (Security(Path(self.state.security_dir))
                                     if self.state and self.state.security_dir else None)

    # ---------------------------------------------------------------- state
    @property
    def _state_path(self) -> Path:
        return self.base_dir / STATE_FILE

    def _load_state(self) -> ClusterState | None:
        if not self._state_path.exists():
            return None
        raw = json.loads(self._state_path.read_text())
        nodes = [NodeState(**n) for n in raw["nodes"]]
        return ClusterState(raw["cluster_id"], nodes, raw.get("broker_config", {}),
                            raw.get("security_dir"))

    def _save_state(self) -> None:
        assert self.state is not None
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self._state_path.write_text(json.dumps(asdict(self.state), indent=2))

    def _require_state(self) -> ClusterState:
        if self.state is None:
            raise KafkaStartError(f"no cluster in {self.base_dir}: start it first")
        return self.state

    @property
    def bootstrap(self) -> str:
        state = self._require_state()
        return ",".join(f"{self.host}:{n.port}" for n in state.nodes)

    @property
    def sasl_bootstrap(self) -> str:
        """The SASL_SSL listeners of a secured cluster."""
        return ",".join(f"{self.host}:{n.sasl_port}" for n in self._require_state().nodes)

    @property
    def ssl_bootstrap(self) -> str:
        """The SSL listeners (client certificates required) of a secured cluster."""
        return ",".join(f"{self.host}:{n.ssl_port}" for n in self._require_state().nodes)

    def node(self, node_id: int) -> NodeState:
        for n in self._require_state().nodes:
            if n.node_id == node_id:
                return n
        raise KeyError(f"no node {node_id} in cluster {self.base_dir}")

    def node_dir(self, node_id: int) -> Path:
        return self.base_dir / f"node-{node_id}"

    # ------------------------------------------------------------ lifecycle
    def start(self) -> KafkaCluster:
        """Format (first time only) and start every node, then wait until all are ready."""
        java = java_binary()
        classpath = kafka_classpath()
        if self.state is not None and any(pid_alive(n.pid) for n in self.state.nodes):
            raise KafkaStartError(f"a cluster in {self.base_dir} is already running")
        if self.state is None:
            ports = self._ports or [free_port() for _ in range(self.size)]
            secured = self.security is not None
            nodes = [
                NodeState(node_id=i + 1, port=ensure_free(p, f"kafka node {i + 1}"),
                          controller_port=free_port(),
                          sasl_port=free_port() if secured else None,
                          ssl_port=free_port() if secured else None)
                for i, p in enumerate(ports)
            ]
            if self.security is not None:
                self.security.make()
            self.state = ClusterState(new_cluster_id(), nodes, self._broker_config,
                                      str(self.security.folder) if self.security else None)
            for n in nodes:
                self._write_config(n)
                self._format(java, classpath, n)
        for n in self.state.nodes:
            self._launch(java, classpath, n)
        self._save_state()
        self.wait_ready()
        return self

    def _voters(self) -> str:
        state = self._require_state()
        return ",".join(f"{n.node_id}@{self.host}:{n.controller_port}" for n in state.nodes)

    def _write_config(self, n: NodeState) -> None:
        state = self._require_state()
        d = self.node_dir(n.node_id)
        (d / "data").mkdir(parents=True, exist_ok=True)
        rf = str(min(3, len(state.nodes)))
        props: dict[str, str] = {
            "process.roles": "broker,controller",
            "node.id": str(n.node_id),
            "listeners": (f"PLAINTEXT://{self.host}:{n.port},"
                          f"CONTROLLER://{self.host}:{n.controller_port}"),
            "advertised.listeners": f"PLAINTEXT://{self.host}:{n.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(d / "data"),
            "num.partitions": "1",
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            **({"offsets.topic.num.partitions": "2", "transaction.state.log.num.partitions": "2",
                "share.coordinator.state.topic.num.partitions": "2"} if self.lean else {}),
            # small segments and a quick retention check let drills shorten retention for real
            "log.retention.check.interval.ms": "5000",
        }
        if self.security is not None:
            props["listeners"] += (f",SASL_SSL://{self.host}:{n.sasl_port},"
                                   f"SSL://{self.host}:{n.ssl_port}")
            props["advertised.listeners"] += (f",SASL_SSL://{self.host}:{n.sasl_port},"
                                              f"SSL://{self.host}:{n.ssl_port}")
            props["listener.security.protocol.map"] += ",SASL_SSL:SASL_SSL,SSL:SSL"
            props.update(self.security.broker_config())
        if len(state.nodes) == 1:
            props["controller.quorum.bootstrap.servers"] = f"{self.host}:{n.controller_port}"
        else:
            props["controller.quorum.voters"] = self._voters()
        props.update(state.broker_config)
        (d / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (d / "log4j2.properties").write_text(_LOG4J2.format(log=d / "server.log"))

    def _format(self, java: str, classpath: str, n: NodeState) -> None:
        state = self._require_state()
        d = self.node_dir(n.node_id)
        cmd = [java, "-cp", classpath, "kafka.tools.StorageTool", "format",
               # `--cluster-id=`: one id in 32 starts with '-', which argparse reads as a flag
               f"--cluster-id={state.cluster_id}", "-c", str(d / "server.properties")]
        if len(state.nodes) == 1:
            cmd.append("--standalone")
        if self.security is not None:
            cmd += self.security.scram_args()
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              env=self._env(n), check=False)
        if proc.returncode != 0:
            raise KafkaStartError(
                f"formatting node {n.node_id} storage in {d} failed "
                f"(exit {proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}"
            )

    def _env(self, n: NodeState) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("CLASSPATH", None)
        return env

    def _launch(self, java: str, classpath: str, n: NodeState) -> None:
        d = self.node_dir(n.node_id)
        cmd = [
            java, f"-Xmx{self.heap}", "-Xms128m", "-XX:+UseG1GC", "-Djava.awt.headless=true",
            *(["-XX:TieredStopAtLevel=1"] if self.lean else []),
            f"-Dlog4j2.configurationFile={d / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={d}",
            "-cp", classpath, "kafka.Kafka", str(d / "server.properties"),
        ]
        out = open(d / "stdout.log", "ab")  # noqa: SIM115 - the child owns it from here
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=self._env(n),
                                start_new_session=True)
        out.close()
        n.pid = proc.pid

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        """Wait until every live node answers and the cluster's metadata lists them all."""
        state = self._require_state()
        live = [n for n in state.nodes if pid_alive(n.pid)]
        deadline = time.monotonic() + timeout
        for n in live:
            try:
                for port in (n.sasl_port, n.ssl_port):
                    if port:
                        wait_open(port, max(1.0, deadline - time.monotonic()),
                                  f"kafka node {n.node_id}'s secured listener", self.host)
                wait_open(n.port, max(1.0, deadline - time.monotonic()),
                          f"kafka node {n.node_id}", self.host)
            except TimeoutError as exc:
                raise KafkaStartError(f"{exc}; see {self.node_dir(n.node_id) / 'server.log'}") \
                    from exc
        self._wait_brokers({n.node_id for n in live}, deadline)

    def _wait_brokers(self, expected: set[int], deadline: float) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 2000})
        seen: set[int] = set()
        while time.monotonic() < deadline:
            try:
                md = admin.list_topics(timeout=2)
                seen = set(md.brokers)
                if expected <= seen:
                    return
            except Exception:  # noqa: BLE001 - not up yet; retried until the deadline
                pass
            time.sleep(0.5)
        raise KafkaStartError(
            f"kafka cluster in {self.base_dir}: brokers {sorted(expected)} expected, "
            f"metadata lists {sorted(seen)}"
        )

    def kill(self, node_id: int) -> None:
        """SIGKILL one node: no controlled shutdown, page cache aside, as in a crash."""
        n = self.node(node_id)
        if n.pid and pid_alive(n.pid):
            os.killpg(n.pid, signal.SIGKILL)
            wait_dead(n.pid, STOP_TIMEOUT_S)
        n.pid = None
        self._save_state()

    def pause(self, node_id: int) -> None:
        """SIGSTOP one node: alive but silent, so it stops fetching and falls out of the ISR."""
        n = self.node(node_id)
        if not (n.pid and pid_alive(n.pid)):
            raise KafkaStartError(f"node {node_id} is not running: it cannot be paused")
        os.killpg(n.pid, signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        n = self.node(node_id)
        if n.pid and pid_alive(n.pid):
            os.killpg(n.pid, signal.SIGCONT)

    def restart(self, node_id: int, timeout: float = START_TIMEOUT_S) -> None:
        n = self.node(node_id)
        if n.pid and pid_alive(n.pid):
            raise KafkaStartError(f"node {node_id} is still running (pid {n.pid})")
        self._launch(java_binary(), kafka_classpath(), n)
        self._save_state()
        wait_open(n.port, timeout, f"kafka node {node_id}", self.host)
        state = self._require_state()
        self._wait_brokers({m.node_id for m in state.nodes if pid_alive(m.pid)},
                           time.monotonic() + timeout)

    def stop(self) -> None:
        """SIGTERM every node at once (controlled shutdown), SIGKILL what is left after a while."""
        if self.state is None:
            return
        pids = [n.pid for n in self.state.nodes if n.pid and pid_alive(n.pid)]
        for pid in pids:
            signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for pid in pids:
            if not wait_dead(pid, max(0.1, deadline - time.monotonic())):
                signal_group(pid, signal.SIGKILL)
                wait_dead(pid, 10)
        for n in self.state.nodes:
            n.pid = None
        self._save_state()

    def running(self) -> dict[int, bool]:
        state = self._require_state()
        return {n.node_id: pid_alive(n.pid) for n in state.nodes}

    def describe(self) -> dict[str, Any]:
        state = self._require_state()
        return {
            "dir": str(self.base_dir),
            "cluster_id": state.cluster_id,
            "bootstrap": self.bootstrap,
            "nodes": [
                {"node_id": n.node_id, "port": n.port, "pid": n.pid, "running": pid_alive(n.pid),
                 "log": str(self.node_dir(n.node_id) / "server.log")}
                for n in state.nodes
            ],
        }


def KafkaNode(base_dir: Path | str, port: int | None = None, **kw: Any) -> KafkaCluster:  # noqa: N802
    """A single-node KRaft Kafka: the cluster of size one."""
    return KafkaCluster(base_dir, size=1, ports=[port] if port else None, **kw)


class StageProducer:
    """A producer for the records a test puts on the stage: every record is acknowledged by
    all in-sync replicas, or `flush` raises naming the ones that were not and why.

    A bare confluent-kafka producer drops a record whose delivery failed without a word
    unless a delivery callback is registered: the test then counts a topic short of what it
    believes it wrote, and blames the tool. Idempotence makes the broker's retries after a
    timeout neither duplicate nor reorder what is written."""

    def __init__(self, bootstrap: str, conf: Mapping[str, Any] | None = None) -> None:
        """`conf`: more of the client's settings (librdkafka's names), e.g. linger.ms."""
        from confluent_kafka import Producer

        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                   "enable.idempotence": True, **(conf or {})})
        self.failed: list[str] = []

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed.append(f"{msg.topic()}[{msg.partition()}]: {err}")

    def produce(self, topic: str, **kw: Any) -> None:
        self._producer.produce(topic, on_delivery=self._delivered, **kw)
        self._producer.poll(0)  # serves the delivery reports as they come

    def flush(self, timeout_s: float = 60.0) -> None:
        left = self._producer.flush(timeout_s)
        if left or self.failed:
            raise ServiceError(f"stage records not delivered: {left} still queued after "
                               f"{timeout_s:.0f} s, {len(self.failed)} failed "
                               f"({'; '.join(self.failed[:3])})")
