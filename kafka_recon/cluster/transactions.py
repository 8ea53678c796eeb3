"""Open transactions on a topic's partitions: what holds a window's read back, and who holds it.

A `read_committed` reader (the replay, and every sink) reads a partition only up to its last
stable offset (LSO): the first offset of the oldest transaction still open on it. A transaction
left open (a producer that died mid-transaction, until the broker aborts it after its
`transaction.timeout.ms`, 15 minutes at most by default) hides every record after its first
offset, committed or not. Read then, a window's committed records past the LSO would look lost
on the write side. So a window whose read reaches a partition's LSO while the partition holds
more (its high watermark beyond) is *blocked*: the run waits for it within a bound, and if it is
still blocked, it is `inconclusive`, naming the partition, the LSO and the transaction holding
it (`open_transaction`), never a loss.

Who holds it comes from Kafka's Admin API (`describeProducers`, `listTransactions`,
`describeTransactions`), which confluent-kafka lacks: a small Java program of kafka-recon's jar
(`kafkarecon.admin.OpenTransactions`) asks, read-only, with the flow's own client settings.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from kafka_recon.errors import TopicError
from kafka_recon.sources.kafka_client import KafkaEndpoint
from kafka_recon.sources.topic import TIMEOUT_S, Client

if TYPE_CHECKING:
    from kafka_recon.sources.topic import PartitionRange

HELPER = "kafkarecon.admin.OpenTransactions"
# the fix an owner reads, with the cause's name
FIX = ("find the producer named above and let it commit or abort; a producer "
       "that died holds the partition until the broker aborts its transaction after its "
       "transaction.timeout.ms (lower it on the producer); a hanging one can be aborted with "
       "`kafka-transactions.sh --bootstrap-server ... abort --topic T --partition P "
       "--start-offset N`; then re-run the window")


@dataclass(frozen=True)
class OpenTransaction:
    """One transaction in progress on a partition, as the Admin API describes it."""

    partition: int
    producer_id: int
    producer_epoch: int
    first_offset: int
    last_timestamp_ms: int
    transactional_id: str | None = None   # None: the principal may not describe it
    state: str | None = None
    timeout_ms: int | None = None
    started_ms: int | None = None

    def text(self) -> str:
        who = (f"transactional id '{self.transactional_id}' (producer id {self.producer_id}, "
               f"epoch {self.producer_epoch})" if self.transactional_id
               else f"producer id {self.producer_id} (epoch {self.producer_epoch}; its "
                    "transactional id is not visible: DESCRIBE on TransactionalId)")
        since = _iso(self.started_ms if self.started_ms is not None else
                     self.last_timestamp_ms)
        said = f"{who}, open since {since} from offset {self.first_offset}"
        if self.timeout_ms is not None:
            said += f", transaction.timeout.ms {self.timeout_ms}"
        return said


@dataclass(frozen=True)
class Blocked:
    """A partition whose window read stops at its last stable offset while it holds more."""

    partition: int
    stable: int                  # the last stable offset: a read_committed reader stops here
    high_watermark: int
    holders: list[OpenTransaction] = field(default_factory=list)

    def text(self, topic: str) -> str:
        held = "; ".join(h.text() for h in self.holders) or \
            "the transaction holding it could not be described"
        return (f"partition {self.partition} of '{topic}': last stable offset {self.stable}, "
                f"high watermark {self.high_watermark}: held by {held}")


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds") \
        .replace("+00:00", "Z")


def stable_offsets(ep: KafkaEndpoint, topic: str, parts: list[int]
                   ) -> dict[int, tuple[int, int]]:
    """Each partition's (last stable offset, high watermark), from its leader."""
    from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    out: dict[int, list[int]] = {p: [0, 0] for p in parts}
    with Client(ep, "admin") as client:
        for i, level in enumerate((IsolationLevel.READ_COMMITTED,
                                   IsolationLevel.READ_UNCOMMITTED)):
            futures = client.handle.list_offsets(
                {TopicPartition(topic, p): OffsetSpec.latest() for p in parts},
                isolation_level=level, request_timeout=TIMEOUT_S)
            for tp, fut in futures.items():
                try:
                    out[tp.partition][i] = int(fut.result(TIMEOUT_S + 2).offset)
                except (KafkaException, TimeoutError) as exc:
                    raise TopicError(f"topic '{topic}' on {ep.where}: the offsets of partition "
                                     f"{tp.partition}: {exc}") from None
    return {p: (lso, hw) for p, (lso, hw) in out.items()}


def blocked_partitions(ep: KafkaEndpoint, topic: str, ranges: list[PartitionRange],
                       offsets: dict[int, tuple[int, int]] | None = None) -> list[Blocked]:
    """The partitions whose window read reaches their last stable offset while they hold
    records past it: an open transaction hides what may be the window's records. `offsets`:
    the partitions' (last stable offset, high watermark), when the caller has read them."""
    offsets = offsets or stable_offsets(ep, topic, [r.partition for r in ranges])
    return [Blocked(r.partition, lso, hw) for r in ranges
            for lso, hw in [offsets[r.partition]] if lso < hw and r.end >= lso]


def open_transactions(ep: KafkaEndpoint, topic: str, parts: list[int]
                      ) -> list[OpenTransaction]:
    """Every transaction open on the partitions, through the Admin API (the Java helper).
    TopicError with the helper's one line when it cannot ask."""
    import subprocess

    from kafka_recon.settings import admin_command

    props = "\n".join(f"{k}={_escaped(v)}" for k, v in ep.java().items())
    try:
        done = subprocess.run([*admin_command(), HELPER, topic, ",".join(map(str, parts))],
                              input=props, capture_output=True, text=True,
                              timeout=4 * TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TopicError(f"topic '{topic}' on {ep.where}: its open transactions could not be "
                         f"described: {exc}") from None
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["no answer"])[-1]
        raise TopicError(f"topic '{topic}' on {ep.where}: its open transactions could not be "
                         f"described: {why}")
    return [OpenTransaction(**json.loads(line)) for line in done.stdout.splitlines()
            if line.startswith("{")]


def _escaped(value: str) -> str:
    """A value in a Java properties text: backslashes and line breaks kept as they are."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


def named(ep: KafkaEndpoint, topic: str, blocked: list[Blocked]) -> list[Blocked]:
    """The blocked partitions, each with the transactions open on it (none named when the
    Admin API cannot be asked: the partition and its offsets are still said)."""
    try:
        found = open_transactions(ep, topic, [b.partition for b in blocked])
    except TopicError:
        found = []
    return [Blocked(b.partition, b.stable, b.high_watermark,
                    sorted((t for t in found if t.partition == b.partition),
                           key=lambda t: t.first_offset)) for b in blocked]


class TransactionOpen(TopicError):
    """A window's read is held back by an open transaction (cause `open_transaction`): the run
    is inconclusive, naming the partitions, their last stable offsets and who holds them."""

    def __init__(self, topic: str, blocked: list[Blocked], waited_s: float | None = None
                 ) -> None:
        self.blocked = blocked
        waited = f"; waited {waited_s:.0f} s" if waited_s else ""
        super().__init__(
            f"an open transaction holds back the read of topic '{topic}' (open_transaction"
            f"{waited}): " + " | ".join(b.text(topic) for b in blocked)
            + f". The records past each last stable offset cannot be read yet, so the window "
              f"is not judged. Fix: {FIX}")


def wait_for_stable(ep: KafkaEndpoint, topic: str, ranges: list[PartitionRange],
                    wait_s: float, poll_s: float = 2.0) -> list[Blocked]:
    """The partitions still blocked after waiting up to `wait_s` for their open transactions
    to end (none: the read can go on)."""
    deadline = time.monotonic() + wait_s
    while True:
        blocked = blocked_partitions(ep, topic, ranges)
        if not blocked or time.monotonic() >= deadline:
            return blocked
        time.sleep(min(poll_s, max(deadline - time.monotonic(), 0.0)))
