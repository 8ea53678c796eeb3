"""Faults on the drill's cluster, aimed and timed from what the cluster and the apps report.

Every wait polls observed state (metadata, ledgers, an app's state file) with a deadline, and
fails with what it was waiting for: a fault is never timed by a sleep that happens to work.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

POLL_S = 0.05


class FaultError(RuntimeError):
    """The cluster or an app never reached the state a fault needs."""


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise FaultError(f"waited {timeout:.0f}s for {what}")
        time.sleep(POLL_S)


def admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 3000,
                        "log_level": 0})


def partition_state(bootstrap: str, topic: str, partition: int = 0) -> dict[str, Any] | None:
    """Leader, replicas and ISR of one partition from the cluster's metadata (None: unknown).

    A fresh client each time: metadata cached by a client that talked to a dead broker lags.
    """
    try:
        md = admin(bootstrap).list_topics(topic, timeout=3)
    except Exception:  # noqa: BLE001 - no broker answered this time; the caller polls again
        return None
    t = md.topics.get(topic)
    if t is None or t.error is not None or partition not in t.partitions:
        return None
    p = t.partitions[partition]
    return {"leader": p.leader, "replicas": list(p.replicas), "isr": list(p.isrs)}


def leader_of(bootstrap: str, topic: str, partition: int = 0) -> int:
    state = wait_for(f"a leader of {topic}-{partition}",
                     lambda: (s := partition_state(bootstrap, topic, partition))
                     and s["leader"] >= 0 and s, 60)
    return int(state["leader"])


def wait_isr(bootstrap: str, topic: str, partition: int, want: Callable[[list[int]], bool],
             what: str, timeout: float = 60.0) -> list[int]:
    def check() -> list[int] | None:
        s = partition_state(bootstrap, topic, partition)
        return s["isr"] if s and want(s["isr"]) else None
    return list(wait_for(f"the ISR of {topic}-{partition} to become {what}", check, timeout))


def wait_leader_moved(bootstrap: str, topic: str, partition: int, old: int,
                      timeout: float = 60.0) -> int:
    def check() -> int | None:
        s = partition_state(bootstrap, topic, partition)
        return s["leader"] if s and s["leader"] not in (-1, old) else None
    return int(wait_for(f"a new leader of {topic}-{partition} (was {old})", check, timeout))


def alter_topic(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
               for k, v in configs.items()]
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    client = admin(bootstrap)  # referenced until the futures resolve
    for fut in client.incremental_alter_configs([res]).values():
        fut.result(30)


def log_start(bootstrap: str, topic: str, partition: int) -> int:
    return watermarks(bootstrap, topic, partition)[0]


def watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """(log start, end offset) of a partition."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafka-recon-drill-probe",
                  "log_level": 0})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=5,
                                            cached=False)
        return int(low), int(high)
    finally:
        c.close()


def app_state(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}
