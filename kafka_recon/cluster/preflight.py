"""Before counting: can kafka-recon's principal do what a run needs? Each missing ACL, named.

With too few rights Kafka's clients only time out or say "Broker transport failure". Each right
a run needs is asked for directly, with a request that needs exactly it and changes nothing:

- DESCRIBE on the topic: its metadata and offsets (staging, the replay's offsets);
- READ on the topic: the replay fetches its records;
- DESCRIBE on each production group: its committed offsets, without which the run cannot
  tell a consume-side loss to retention and is inconclusive;
- DESCRIBE on the groups kafka-recon's own clients name (`kafka-recon-*`, a prefixed ACL):
  librdkafka looks up their coordinator.

Missing DESCRIBE_CONFIGS (topic, cluster) only shortens the audit; the audit says so itself.

A repair's delivery needs more (`repair_gaps`), checked before it publishes anything: READ and
WRITE on the repair topic (the ledger is read back from it), and WRITE on the transactional
ids `kafka-recon-repair-` (prefixed).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kafka_recon.errors import TopicError
from kafka_recon.sources.kafka_client import KafkaEndpoint
from kafka_recon.sources.topic import (
    GROUP_PREFIX,
    TIMEOUT_S,
    Client,
    GroupDenied,
    TopicDenied,
    TopicMissing,
    group_committed,
    partitions,
)

READ_PROBE_S = 8.0
PROBE_S = 5.0


@dataclass(frozen=True)
class Gap:
    acl: str     # "READ on Topic:orders"
    cost: str    # what the run cannot do without it


def _group_gap(ep: KafkaEndpoint, topic: str, part: int, group: str) -> bool:
    """True when the principal may not describe `group`."""
    try:
        group_committed(ep, topic, group, [part], ask_s=PROBE_S)
    except GroupDenied:
        return True
    return False


def _read_probe(client: Client, topic: str, parts: list[int]) -> tuple[bool, bool]:
    """(READ refused on the topic, DESCRIBE refused on kafka-recon's own group) from one
    consumer that fetches the topic's first record. A topic with no record has nothing a
    replay could read: only the group is probed then."""
    from confluent_kafka import KafkaError, TopicPartition

    consumer = client.handle
    target = None
    for part in parts:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, part),
                                                   timeout=TIMEOUT_S, cached=False)
        if high > low:
            target = TopicPartition(topic, part, low)
            break
    consumer.assign([target or TopicPartition(topic, parts[0])])
    read_refused = group_refused = False
    try:
        deadline = time.monotonic() + READ_PROBE_S
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                if target is None:
                    break
                continue
            err = msg.error()
            if err is None:
                break
            if err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                group_refused = True
            elif err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                read_refused = True
                break
        return read_refused, group_refused
    finally:
        consumer.unassign()


def gaps(ep: KafkaEndpoint, topic: str, groups: list[str]) -> list[Gap]:
    """Every ACL a run over this topic and these groups needs and the principal lacks."""
    with Client(ep) as client:
        try:
            parts = partitions(client, topic)
        except TopicDenied:
            return [Gap(f"DESCRIBE on Topic:{topic}", "nothing can be counted")]
        found: list[Gap] = []
        read_refused, group_refused = _read_probe(client, topic, parts)
    if read_refused:
        found.append(Gap(f"READ on Topic:{topic}", "the replay cannot read records"))
    if group_refused:
        found.append(Gap(f"READ on Group:{GROUP_PREFIX} (prefixed)",
                         "kafka-recon's own consumers cannot find their coordinator"))
    for group in groups:
        if _group_gap(ep, topic, parts[0], group):
            found.append(Gap(f"DESCRIBE on Group:{group}",
                             "without its committed offsets the run is inconclusive"))
    return found


def _listed(missing: list[Gap]) -> str:
    return "; ".join(f"{g.acl} ({g.cost})" for g in missing)


def check(ep: KafkaEndpoint, topic: str, groups: list[str]) -> None:
    """TopicError naming every missing ACL and its cost; nothing when all are granted."""
    missing = gaps(ep, topic, groups)
    if missing:
        listed = _listed(missing)
        raise TopicError(f"{ep.where}: kafka-recon's principal lacks {len(missing)} ACL(s): "
                         f"{listed}. Grant them (docs/cluster.md, 'The preflight, and the "
                         "ACLs to grant')")


def check_queue(ep: KafkaEndpoint, topic: str, connector: str) -> None:
    """TopicError naming the ACLs reading a sink connector's dead-letter queue needs (READ and
    DESCRIBE on its topic), before the run reads it: without them, records the queue holds
    would be reported lost. A queue never created (no record ever dead-lettered) is none."""
    try:
        missing = gaps(ep, topic, [])
    except TopicMissing:
        return
    if missing:
        raise TopicError(f"{ep.where}: kafka-recon's principal lacks {len(missing)} ACL(s) to "
                         f"read connector '{connector}''s dead-letter queue: "
                         f"{_listed(missing)}. Grant them (docs/connect.md, 'What is read, "
                         "and the permissions it needs')")


def _topic_operations(ep: KafkaEndpoint, topic: str) -> set[str] | None:
    """What the principal may do on the topic, as the broker says (None: it does not say,
    a cluster without an authorizer)."""
    from confluent_kafka import TopicCollection

    with Client(ep, "admin") as client:
        futures = client.handle.describe_topics(TopicCollection([topic]),
                                                include_authorized_operations=True,
                                                request_timeout=TIMEOUT_S)
        described = futures[topic].result(TIMEOUT_S)
    ops = described.authorized_operations
    return None if ops is None else {op.name for op in ops}


def _transactions_refused(ep: KafkaEndpoint, transactional_id: str) -> bool:
    """True when the principal may not use `transactional_id`: one producer initialises it
    (the coordinator registers the id; no record is written)."""
    from confluent_kafka import KafkaError, KafkaException, Producer

    producer = Producer({**ep.librdkafka(), "transactional.id": transactional_id})
    try:
        producer.init_transactions(TIMEOUT_S)
    except KafkaException as exc:
        err = exc.args[0]
        if err.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            return True
        raise TopicError(f"{ep.where}: transactions cannot start under "
                         f"'{transactional_id}': {err.str()}") from None
    return False


def repair_gaps(ep: KafkaEndpoint, topic: str, transactional_id: str,
                described: bool = True) -> list[Gap]:
    """Every ACL a delivery to a repair topic needs and the principal lacks; `described`:
    whether the principal could describe the topic at all (READ and WRITE imply DESCRIBE,
    so a principal that cannot describe it has neither)."""
    found: list[Gap] = []
    ops = _topic_operations(ep, topic) if described else set()
    if ops is not None and "ALL" not in ops:
        for op, cost in (("READ", "the ledger of what was delivered cannot be read"),
                         ("WRITE", "nothing can be published to it")):
            if op not in ops:
                found.append(Gap(f"{op} on Topic:{topic}", cost))
    if _transactions_refused(ep, transactional_id):
        found.append(Gap("WRITE on TransactionalId:kafka-recon-repair- (prefixed)",
                         "records cannot be published exactly once"))
    return found


def check_repair(ep: KafkaEndpoint, topic: str, transactional_id: str,
                 described: bool = True) -> None:
    """TopicError naming every ACL a delivery lacks, before anything is published."""
    missing = repair_gaps(ep, topic, transactional_id, described)
    if missing:
        listed = _listed(missing)
        raise TopicError(f"{ep.where}: kafka-recon's principal lacks {len(missing)} ACL(s) "
                         f"to repair into '{topic}': {listed}. Grant them (docs/repair.md, "
                         "'ACLs'); nothing was published")
