"""An Apache Flume 1.11 agent on loopback: HTTP source -> memory channel -> Kafka sink.

The agent of the drill's S10 (a memory channel lost with its process). Its JSON monitoring is
on, so kafka-recon reads its counters like any production agent's. The jars come from Maven
Central through `jvm/pom.xml` (profile `flume`).
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

from harness.services.base import Service, java_binary, kill_now, terminate
from harness.services.ports import HOST, free_port, wait_open
from kafka_recon.settings import flume_classpath

CONF = """\
a1.sources = r1
a1.channels = c1
a1.sinks = k1
a1.sources.r1.type = http
a1.sources.r1.bind = {host}
a1.sources.r1.port = {http_port}
a1.sources.r1.channels = c1
a1.channels.c1.type = memory
a1.channels.c1.capacity = 100000
a1.channels.c1.transactionCapacity = 1000
a1.sinks.k1.type = org.apache.flume.sink.kafka.KafkaSink
a1.sinks.k1.channel = c1
a1.sinks.k1.kafka.bootstrap.servers = {bootstrap}
a1.sinks.k1.kafka.topic = {topic}
a1.sinks.k1.flumeBatchSize = 100
a1.sinks.k1.kafka.producer.acks = all
a1.sinks.k1.kafka.producer.linger.ms = 5
"""


class FlumeAgent(Service):
    def __init__(self, folder: Path, bootstrap: str, topic: str) -> None:
        self.folder = folder.resolve()  # the agent runs in it: a relative path would nest
        self.folder.mkdir(parents=True, exist_ok=True)
        self.http_port, self.monitor_port = free_port(), free_port()
        (self.folder / "agent.conf").write_text(CONF.format(host=HOST, http_port=self.http_port,
                                                       bootstrap=bootstrap, topic=topic))
        self.pid: int | None = None
        self.starts = 0

    @property
    def metrics_url(self) -> str:
        return f"http://{HOST}:{self.monitor_port}/metrics"

    def start(self, timeout: float = 120) -> FlumeAgent:
        cmd = [java_binary(), "-Xmx256m", "-cp", flume_classpath(),
               "-Dflume.monitoring.type=http", f"-Dflume.monitoring.port={self.monitor_port}",
               "org.apache.flume.node.Application", "-n", "a1",
               "-f", str(self.folder / "agent.conf")]
        log = open(self.folder / f"agent-{self.starts}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=self.folder,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        self.pid, self.starts = proc.pid, self.starts + 1
        try:
            wait_open(self.http_port, timeout, "flume http source")
            wait_open(self.monitor_port, timeout, "flume monitoring")
        except TimeoutError as exc:
            state = "running" if proc.poll() is None else f"exited {proc.returncode}"
            tail = (self.folder / f"agent-{self.starts - 1}.log").read_text(
                errors="replace").splitlines()[-15:]
            self.kill()
            raise RuntimeError(f"flume agent ({state}): {exc}; its log ends:\n"
                               + "\n".join(tail)) from exc
        return self

    def post(self, events: list[dict[str, Any]]) -> None:
        """Hand events to the HTTP source; it answers 200 once they are in the channel."""
        body = json.dumps(events).encode()
        req = urllib.request.Request(f"http://{HOST}:{self.http_port}", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310
            if resp.status != 200:
                raise RuntimeError(f"flume http source answered {resp.status}")

    def metrics(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.metrics_url, timeout=5) as resp:  # noqa: S310
            return dict(json.loads(resp.read()))

    def kill(self) -> None:
        """SIGKILL: the memory channel dies with the process."""
        kill_now(self.pid)
        self.pid = None

    def stop(self) -> None:
        terminate(self.pid)
        self.pid = None
