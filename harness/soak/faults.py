"""The soak's faults, as data: each a name, what it does to the live pipeline, and what it is
expected to leave behind (the truth decides the exact ids; this only says what to look for).

Each fault takes a `Soak` context (the pipeline, the cluster) and returns a note for the table.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from harness.drill.faults import leader_of, wait_isr
from harness.drill.runner import SAFE_PRODUCER
from harness.live import LivePipeline
from harness.services.kafka import KafkaCluster

# the drill's S7 producer: retries on a short request timeout, without idempotence
RETRYING_PRODUCER = {"acks": "all", "enable.idempotence": False, "retries": 10,
                     "request.timeout.ms": 1500, "delivery.timeout.ms": 120000,
                     "linger.ms": 5}


class Context(Protocol):
    pipeline: LivePipeline
    cluster: KafkaCluster


@dataclass
class Struck:
    """A fault as it struck: when, and what happened (the soaks' table of faults)."""

    fault: str
    started: datetime
    ended: datetime
    note: str


def fault_rows(struck: list[Struck]) -> list[str]:
    """The soaks' table of faults as they struck, in Markdown."""
    from kafka_recon.window import iso_z

    return ["| at (UTC) | fault | what happened |", "|---|---|---|",
            *(f"| {iso_z(s.started)} | {s.fault} | {s.note} |" for s in struck)]


def strike(struck: list[Struck], name: str, what: str, act: Callable[[], str]) -> None:
    """One fault: announced, done, and its note kept in `struck`. A fault that itself failed
    is noted as such, and the soak goes on."""
    from datetime import UTC

    from kafka_recon.window import iso_z

    started = datetime.now(UTC)
    print(f"{iso_z(started)} fault: {what}", flush=True)
    try:
        note = act()
    except Exception as exc:  # noqa: BLE001 - noted in the table, the soak goes on
        note = f"the fault itself failed: {type(exc).__name__}: {exc}"
    struck.append(Struck(name, started, datetime.now(UTC), note))
    print(f"  {note}", flush=True)


@dataclass(frozen=True)
class Fault:
    name: str
    what: str
    act: Callable[[Context, random.Random], str]


def consumer_crash(ctx: Context, rnd: random.Random) -> str:
    code = ctx.pipeline.crash_consumer_after_commit()
    return f"the consumer committed a batch before writing it and died (exit {code})"


def broker_restart(ctx: Context, rnd: random.Random) -> str:
    node = rnd.choice([n.node_id for n in ctx.cluster._require_state().nodes])
    ctx.cluster.kill(node)
    time.sleep(rnd.uniform(5, 20))
    ctx.cluster.restart(node)
    return f"broker {node} killed (SIGKILL) and restarted"


def producer_retries(ctx: Context, rnd: random.Random) -> str:
    """A producer without idempotence retries requests a paused follower holds up: the first
    attempts are written too (seed 000's duplicates)."""
    p = ctx.pipeline
    p.swap_producer(RETRYING_PRODUCER)
    time.sleep(5)
    leader = leader_of(p.bootstrap, p.topic, 0)
    follower = next(n.node_id for n in ctx.cluster._require_state().nodes
                    if n.node_id != leader)
    ctx.cluster.pause(follower)
    try:
        wait_isr(p.bootstrap, p.topic, 0, lambda isr: follower not in isr,
                 f"without {follower}")
    finally:
        ctx.cluster.resume(follower)
    time.sleep(20)
    p.swap_producer(dict(SAFE_PRODUCER))
    return (f"producer without idempotence (request timeout 1.5 s) while follower {follower} "
            "was paused until the ISR shrank; then the safe producer again")


FAULTS = [
    Fault("consumer_crash", "a consumer crash after commit, before writing", consumer_crash),
    Fault("broker_restart", "a broker killed and restarted", broker_restart),
    Fault("producer_retries", "a producer without idempotence retrying", producer_retries),
]
