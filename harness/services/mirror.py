"""MirrorMaker 2 in dedicated mode on loopback: one replication, source cluster alias `A` to
target `B`, the mirror of the drill's replication scenarios.

It runs Kafka's own `org.apache.kafka.connect.mirror.MirrorMaker` (the class behind
`connect-mirror-maker.sh`) from `connect-mirror` 4.2.0 on Maven Central (`jvm/pom.xml`,
profile `mirror`), with the default replication policy: topic `orders` on A becomes
`A.orders` on B. Settings are data (`settings`), so a scenario can run it safe or risky.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from harness.services.base import Service, ServiceError, java_binary, kill_now, terminate

SOURCE, TARGET = "A", "B"

# a single-broker pair of clusters: every topic MirrorMaker 2 makes has one replica; topics
# are looked for every few seconds, so a scenario's new topic is mirrored at once
LOOPBACK: dict[str, Any] = {
    "replication.factor": 1,
    "checkpoints.topic.replication.factor": 1,
    "heartbeats.topic.replication.factor": 1,
    "offset-syncs.topic.replication.factor": 1,
    "offset.storage.replication.factor": 1,
    "status.storage.replication.factor": 1,
    "config.storage.replication.factor": 1,
    "refresh.topics.interval.seconds": 2,
    "refresh.groups.interval.seconds": 5,
    "emit.heartbeats.interval.seconds": 5,
    "tasks.max": 1,
}


def mirrored(topic: str) -> str:
    """The name MirrorMaker 2's default replication policy gives a mirrored topic."""
    return f"{SOURCE}.{topic}"


# Connect worker settings the harness sets: how often the mirror commits its source offsets
WORKER_SETTINGS = ("offset.flush.interval.ms",)


class MirrorMaker2(Service):
    def __init__(self, folder: Path, source: str, target: str, topics: str,
                 settings: dict[str, Any] | None = None) -> None:
        """`source`/`target`: bootstrap servers of the two clusters; `topics`: the regex of
        the source topics to mirror; `settings`: more mm2.properties lines (they win). A
        Connect worker setting (`WORKER_SETTINGS`) is written for the target cluster's
        herder: dedicated MirrorMaker 2 ignores it at the top level (its workerConfig)."""
        self.folder = folder.resolve()
        self.folder.mkdir(parents=True, exist_ok=True)
        settings = {f"{TARGET}.{k}" if k in WORKER_SETTINGS else k: v
                    for k, v in (settings or {}).items()}
        props = {"clusters": f"{SOURCE}, {TARGET}",
                 f"{SOURCE}.bootstrap.servers": source, f"{TARGET}.bootstrap.servers": target,
                 f"{SOURCE}->{TARGET}.enabled": "true", f"{SOURCE}->{TARGET}.topics": topics,
                 f"{TARGET}->{SOURCE}.enabled": "false", **LOOPBACK, **settings}
        self.properties = self.folder / "mm2.properties"
        self.properties.write_text("".join(f"{k} = {v}\n" for k, v in props.items()))
        self.pid: int | None = None
        self.starts = 0

    def start(self, timeout: float = 120) -> MirrorMaker2:
        from kafka_recon.settings import mirror_classpath

        cmd = [java_binary(), "-Xmx384m", "-cp", mirror_classpath(),
               "org.apache.kafka.connect.mirror.MirrorMaker", str(self.properties)]
        log = open(self.folder / f"mm2-{self.starts}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=self.folder,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        self.pid, self.starts = proc.pid, self.starts + 1
        time.sleep(1)
        if proc.poll() is not None:
            raise ServiceError(f"MirrorMaker 2 exited {proc.returncode} at start; its log "
                               f"ends:\n{self.log_tail()}")
        return self

    def log_tail(self, lines: int = 20) -> str:
        path = self.folder / f"mm2-{max(0, self.starts - 1)}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) \
            if path.exists() else "(no log)"

    def kill(self) -> None:
        """SIGKILL: what it had copied but not yet committed it will copy again."""
        kill_now(self.pid)
        self.pid = None

    def pause(self) -> None:
        if self.pid:
            os.killpg(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.pid:
            os.killpg(self.pid, signal.SIGCONT)

    def stop(self) -> None:
        terminate(self.pid)
        self.pid = None


def wait_mirrored(bootstrap: str, topic: str, records: int, timeout: float = 180,
                  mirror: MirrorMaker2 | None = None) -> int:
    """Wait until `topic` on the target holds at least `records` records (end offsets
    summed); returns how many it holds."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mirror-probe",
                         "enable.auto.commit": False})
    deadline, held = time.monotonic() + timeout, 0
    try:
        while time.monotonic() < deadline:
            md = consumer.list_topics(topic, timeout=10).topics.get(topic)
            if md is not None and md.error is None and md.partitions:
                try:
                    held = sum(consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                              timeout=10)[1]
                               for p in md.partitions)
                except KafkaException as e:
                    # a topic the mirror has just made may have no leader yet: not yet held
                    err = e.args[0]
                    if not (err.retriable() or err.code() in (
                            KafkaError.NOT_LEADER_FOR_PARTITION,
                            KafkaError.LEADER_NOT_AVAILABLE)):
                        raise
                else:
                    if held >= records:
                        return held
            time.sleep(1)
    finally:
        consumer.close()
    raise ServiceError(f"topic '{topic}' holds {held} of {records} records after {timeout:.0f}s"
                       + (f"; MirrorMaker 2's log ends:\n{mirror.log_tail()}" if mirror else ""))
