"""Kafka health and configuration risk: the seeds' prevention checklist, checked on every run.

Facts come from the live cluster through the Admin API (topic, partitions, ISR, configs, broker
defaults, production groups' offsets) and from the flow's declared client settings. Rules are
data: one row each, with the seed passage it comes from, a severity and a fix. Reconciliation
says what was lost; this says what will be lost next, and why.
"""

from __future__ import annotations

import concurrent.futures
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_recon.cluster.transactions import OpenTransaction
from kafka_recon.config import ClientProps, Flow, KafkaTier
from kafka_recon.errors import ConfigError
from kafka_recon.runfiles.audit import Audit, Risk
from kafka_recon.runfiles.connectors import Connectors, ConnectorSnapshot
from kafka_recon.sources.kafka_client import KafkaEndpoint, endpoint
from kafka_recon.sources.properties import read_properties
from kafka_recon.sources.topic import GROUP_PREFIX, NO_COMMIT, TopicError

TIMEOUT_S = 15.0
SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2}
# Kafka's own defaults, used when a client does not declare a setting (Kafka 3+/4 clients)
PRODUCER_DEFAULTS: dict[str, str] = {
    "acks": "all", "enable.idempotence": "true", "retries": "2147483647",
    "max.in.flight.requests.per.connection": "5", "retry.backoff.ms": "100",
    "max.request.size": "1048576",
}
CONSUMER_DEFAULTS: dict[str, str] = {"enable.auto.commit": "true",
                                     "max.partition.fetch.bytes": "1048576"}
RETENTION_MARGIN_MS = 3_600_000  # an hour of slack before unread records are deleted
# message.max.bytes and max.message.bytes count a record batch's overhead, fetch sizes do not:
# Kafka's defaults (1048588 vs 1048576) differ by exactly this and carry the same records
BATCH_OVERHEAD = 12


@dataclass
class Facts:
    topic: str
    partitions: list[dict[str, Any]]          # id, leader, replicas, isr
    topic_config: dict[str, str] | None       # None: the principal may not read it
    broker_config: dict[str, str] | None      # from one live broker: cluster-wide defaults
    groups: dict[str, dict[str, Any]]         # group -> lag, oldest_unconsumed_age_ms,
    #                                           deleted_unread
    producer: dict[str, str] | None           # None: the flow declares no producer settings
    consumer: dict[str, str] | None
    skipped: list[str] = field(default_factory=list)  # ACLs the principal lacks: facts unread
    transactions: list[OpenTransaction] = field(default_factory=list)  # open on the topic
    now_ms: int = 0                           # when the facts were read


@dataclass(frozen=True)
class Hit:
    observed: str
    recommended: str
    where: str = ""


@dataclass(frozen=True)
class Rule:
    id: str
    kind: str          # config_risk | health
    side: str          # write | consume: whose setting it is
    severity: str      # high | medium | low
    seed: str          # the seed article the advice comes from
    why: str
    fix: str
    check: Callable[[Facts], list[Hit]] = field(repr=False)
    reads_topic_config: bool = False  # skipped when the principal may not read the topic's


# ------------------------------------------------------------------ helpers
def _int(v: Any, default: int = 0) -> int:
    try:
        return int(str(v).strip())
    except (TypeError, ValueError):
        return default


def _true(v: Any) -> bool:
    return str(v).strip().lower() == "true"


def _prod(f: Facts, key: str) -> str | None:
    return None if f.producer is None else f.producer.get(key, PRODUCER_DEFAULTS.get(key))


def _cons(f: Facts, key: str) -> str | None:
    return None if f.consumer is None else f.consumer.get(key, CONSUMER_DEFAULTS.get(key))


def _one(cond: bool, observed: str, recommended: str, where: str = "") -> list[Hit]:
    return [Hit(observed, recommended, where)] if cond else []


def _min_isr(f: Facts) -> int:
    return _int((f.topic_config or {}).get("min.insync.replicas"), 1)


def _rf(f: Facts) -> int:
    return min((len(p["replicas"]) for p in f.partitions), default=0)


# ------------------------------------------------------------------ the checks
def _acks(f: Facts) -> list[Hit]:
    acks = _prod(f, "acks")
    return _one(acks is not None and acks not in ("all", "-1"), f"acks={acks}", "acks=all")


def _idempotence(f: Facts) -> list[Hit]:
    retries, idem = _prod(f, "retries"), _prod(f, "enable.idempotence")
    return _one(retries is not None and _int(retries) > 0 and not _true(idem),
                f"retries={retries}, enable.idempotence={idem}", "enable.idempotence=true")


def _in_flight(f: Facts) -> list[Hit]:
    n, idem = _prod(f, "max.in.flight.requests.per.connection"), _prod(f, "enable.idempotence")
    if n is None:
        return []
    limit = 5 if _true(idem) else 1
    return _one(_int(n) > limit, f"max.in.flight.requests.per.connection={n} with "
                f"enable.idempotence={idem}", f"at most {limit}")


def _retries(f: Facts) -> list[Hit]:
    retries = _prod(f, "retries")
    return _one(retries is not None and _int(retries) == 0, "retries=0",
                "retries > 0 (with idempotence)")


def _backoff(f: Facts) -> list[Hit]:
    b = _prod(f, "retry.backoff.ms")
    if f.producer is None or "retry.backoff.ms" not in f.producer:
        return []  # only a value a team chose; Kafka's own default backs off exponentially
    return _one(_int(b) < 1000, f"retry.backoff.ms={b}", "retry.backoff.ms >= 1000")


def _replication(f: Facts) -> list[Hit]:
    return _one(0 < _rf(f) < 3, f"replication factor {_rf(f)}", "3")


def _min_isr_low(f: Facts) -> list[Hit]:
    return _one(_min_isr(f) < 2, f"min.insync.replicas={_min_isr(f)}", "2")


def _min_isr_equal_rf(f: Facts) -> list[Hit]:
    rf = _rf(f)
    advice = (f"min.insync.replicas={rf - 1} (below the replication factor)" if rf > 2
              else "replication factor 3 with min.insync.replicas=2")
    return _one(rf > 0 and _min_isr(f) >= rf,
                f"min.insync.replicas={_min_isr(f)} with replication factor {rf}", advice)


def _unclean(f: Facts) -> list[Hit]:
    v = (f.topic_config or {}).get("unclean.leader.election.enable", "false")
    return _one(_true(v), f"unclean.leader.election.enable={v}", "false")


def _auto_commit(f: Facts) -> list[Hit]:
    v = _cons(f, "enable.auto.commit")
    return _one(v is not None and _true(v), f"enable.auto.commit={v}",
                "enable.auto.commit=false, commit after processing")


def _size_chain(f: Facts) -> list[Hit]:
    hits = []
    topic_max = _int((f.topic_config or {}).get("max.message.bytes"), 1048588)
    req = _prod(f, "max.request.size")
    if req is not None and _int(req) > topic_max:
        hits.append(Hit(f"producer max.request.size={req} > topic max.message.bytes="
                        f"{topic_max}", "max.request.size <= max.message.bytes", "producer"))
    fetch = _cons(f, "max.partition.fetch.bytes")
    if fetch is not None and topic_max - BATCH_OVERHEAD > _int(fetch):
        hits.append(Hit(f"topic max.message.bytes={topic_max} > consumer "
                        f"max.partition.fetch.bytes={fetch}",
                        "max.partition.fetch.bytes >= max.message.bytes", "consumer"))
    rfetch = _int((f.broker_config or {}).get("replica.fetch.max.bytes"), 1048576)
    mmax = _int((f.broker_config or {}).get("message.max.bytes"), 1048588)
    if rfetch < mmax - BATCH_OVERHEAD:
        hits.append(Hit(f"broker replica.fetch.max.bytes={rfetch} < message.max.bytes={mmax}",
                        "replica.fetch.max.bytes >= message.max.bytes", "broker"))
    return hits


def _retention(f: Facts) -> list[Hit]:
    retention = _int((f.topic_config or {}).get("retention.ms"), -1)
    if retention < 0:
        return []
    hits = []
    for g, info in sorted(f.groups.items()):
        oldest = info.get("oldest_unconsumed_age_ms")
        if info.get("deleted_unread"):
            # retention already deleted records the group had not read: its lag outran it
            hits.append(Hit(f"retention.ms={retention}; retention deleted "
                            f"{info['deleted_unread']} records group {g} had not consumed "
                            "(its committed offsets are behind the log's start)",
                            "retention.ms longer than the group's lag ever grows", g))
        elif oldest is not None and retention < oldest + RETENTION_MARGIN_MS:
            hits.append(Hit(f"retention.ms={retention}; oldest record group {g} has not "
                            f"consumed is {oldest} ms old",
                            f"retention.ms > {oldest + RETENTION_MARGIN_MS}", g))
    return hits


def _under_replicated(f: Facts) -> list[Hit]:
    return [Hit(f"partition {p['id']}: ISR {p['isr']} of replicas {p['replicas']}",
                "every replica in sync", f"partition {p['id']}")
            for p in f.partitions if len(p["isr"]) < len(p["replicas"])]


def _below_min_isr(f: Facts) -> list[Hit]:
    return [Hit(f"partition {p['id']}: ISR size {len(p['isr'])} < min.insync.replicas "
                f"{_min_isr(f)}", f">= {_min_isr(f)}", f"partition {p['id']}")
            for p in f.partitions if len(p["isr"]) < _min_isr(f)]


# the broker's longest transaction timeout by default (transaction.max.timeout.ms): a
# transaction whose own timeout could not be read is hanging past it
MAX_TRANSACTION_MS = 900_000


def _hanging(f: Facts) -> list[Hit]:
    hits = []
    for t in f.transactions:
        limit = t.timeout_ms or MAX_TRANSACTION_MS
        age = f.now_ms - (t.started_ms if t.started_ms is not None else t.last_timestamp_ms)
        if age > limit:
            hits.append(Hit(f"partition {t.partition}: {t.text()}; open {age // 1000} s",
                            f"ended within its timeout ({limit // 1000} s)",
                            f"partition {t.partition}"))
    return hits


def _no_leader(f: Facts) -> list[Hit]:
    return [Hit(f"partition {p['id']}: no leader", "a leader", f"partition {p['id']}")
            for p in f.partitions if p["leader"] is None or p["leader"] < 0]


RULES: list[Rule] = [
    Rule("P1-acks", "config_risk", "write", "high", "000,001,002",
         "Without acks=all a record the leader accepted is lost if the leader dies before "
         "followers copy it.", "Set acks=all on the producer.", _acks),
    Rule("P2-idempotence", "config_risk", "write", "medium", "000,003",
         "Retries without idempotence write a record twice when an ack is lost.",
         "Set enable.idempotence=true.", _idempotence),
    Rule("P3-in-flight", "config_risk", "write", "medium", "000",
         "More requests in flight than idempotence can order reorders records on retry.",
         "Lower max.in.flight.requests.per.connection (5 with idempotence, 1 without).",
         _in_flight),
    Rule("P4-retries", "config_risk", "write", "high", "000,003",
         "With retries=0 a transient error (leader change, full buffer) loses the record.",
         "Leave retries at its default and bound sends with delivery.timeout.ms.", _retries),
    Rule("P5-retry-backoff", "config_risk", "write", "low", "000",
         "A short backoff burns every retry within one leader election on a flaky network.",
         "Set retry.backoff.ms to a second or more.", _backoff),
    Rule("T1-replication", "config_risk", "write", "high", "000,002",
         "Fewer than three replicas cannot lose a broker and still keep two in sync.",
         "Recreate or reassign the topic with replication factor 3.", _replication),
    Rule("T2-min-isr", "config_risk", "write", "high", "000,002",
         "With min.insync.replicas below 2, acks=all is satisfied by the leader alone.",
         "Set min.insync.replicas=2 on the topic.", _min_isr_low, reads_topic_config=True),
    Rule("T3-min-isr-equals-rf", "config_risk", "write", "medium", "002",
         "With min.insync.replicas equal to the replication factor, one broker down stops all "
         "writes.", "Keep min.insync.replicas below the replication factor.",
         _min_isr_equal_rf, reads_topic_config=True),
    Rule("T4-unclean-election", "config_risk", "write", "high", "000,001,002",
         "Unclean election lets a lagging replica become leader and truncates what it lacked.",
         "Set unclean.leader.election.enable=false.", _unclean, reads_topic_config=True),
    Rule("C1-auto-commit", "config_risk", "consume", "high", "000,001",
         "Auto commit commits records that were fetched but not yet processed; a crash loses "
         "them.", "Disable auto commit and commit after processing.", _auto_commit),
    Rule("S1-size-chain", "config_risk", "write", "high", "000,004",
         "A record larger than a later hop can carry is rejected there "
         "(MessageSizeTooLargeException) and lost.",
         "Make the limits agree: max.request.size <= max.message.bytes <= "
         "max.partition.fetch.bytes, replica.fetch.max.bytes >= message.max.bytes.",
         _size_chain, reads_topic_config=True),
    Rule("R1-retention-vs-lag", "config_risk", "consume", "high", "003,004",
         "Retention shorter than the consumer's lag deletes records before they are read.",
         "Raise retention.ms or catch the consumer up.", _retention, reads_topic_config=True),
    Rule("H1-under-replicated", "health", "write", "medium", "002,003",
         "A replica out of sync is one failure closer to loss.",
         "Find the lagging or dead broker and bring it back.", _under_replicated),
    Rule("H2-below-min-isr", "health", "write", "high", "002,003",
         "Below min.insync.replicas, acks=all producers are refused: writes fail or are lost "
         "by clients that do not check.", "Restore the missing brokers.", _below_min_isr,
         reads_topic_config=True),
    Rule("H3-no-leader", "health", "write", "high", "002,003",
         "A partition without a leader is offline: nothing can be written or read.",
         "Restart the partition's replicas; do not enable unclean election to force it.",
         _no_leader),
    Rule("H4-hanging-transaction", "health", "write", "high", "000",
         "A transaction open past its timeout holds every read_committed reader (the sinks, "
         "the replay) at its first offset: nothing after it is consumed, and a window whose "
         "read reaches it is not judged (open_transaction).",
         "Abort it (kafka-transactions.sh --bootstrap-server ... abort --topic T --partition P "
         "--start-offset N; `find-hanging` lists them), then find why its producer neither "
         "committed nor aborted.", _hanging),
]
ACL_COSTS = {
    "Topic": "the topic's own settings (replication, min.insync.replicas, retention, sizes) "
             "are not checked",
    "Cluster": "the brokers' defaults (unclean election, message.max.bytes, "
               "min.insync.replicas) are not checked",
}
RULES.append(Rule(
    "A1-audit-incomplete", "health", "write", "low", "004",
    "kafka-recon's principal may not read these configurations, so part of the audit was "
    "skipped.", "Grant the ACL named (docs/cluster.md, 'The preflight, and the ACLs to grant').",
    lambda f: [Hit(f"missing ACL: {acl}", "granted",
                   ACL_COSTS["Cluster" if ":kafka-cluster" in acl else "Topic"])
               for acl in f.skipped]))
# the admin errors that mean the principal may not: never asked again
def _denied() -> tuple[int, ...]:
    from confluent_kafka import KafkaError

    return (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED)


# Where each rule's advice is documented, for the owner who reads the report: the setting's own
# entry in Apache Kafka's documentation (MirrorMaker 2's for a mirror's)
KAFKA_DOCS = "https://kafka.apache.org/documentation/"
DEBEZIUM_POSTGRES_DOCS = ("https://debezium.io/documentation/reference/stable/connectors/"
                          "postgresql.html")
DOCS = {
    "P1-acks": "#producerconfigs_acks",
    "P2-idempotence": "#producerconfigs_enable.idempotence",
    "P3-in-flight": "#producerconfigs_max.in.flight.requests.per.connection",
    "P4-retries": "#producerconfigs_retries",
    "P5-retry-backoff": "#producerconfigs_retry.backoff.ms",
    "T1-replication": "#replication",
    "T2-min-isr": "#topicconfigs_min.insync.replicas",
    "T3-min-isr-equals-rf": "#topicconfigs_min.insync.replicas",
    "T4-unclean-election": "#topicconfigs_unclean.leader.election.enable",
    "C1-auto-commit": "#consumerconfigs_enable.auto.commit",
    "S1-size-chain": "#topicconfigs_max.message.bytes",
    "R1-retention-vs-lag": "#topicconfigs_retention.ms",
    "H1-under-replicated": "#replication",
    "H2-below-min-isr": "#topicconfigs_min.insync.replicas",
    "H3-no-leader": "#replication",
    "H4-hanging-transaction": "#producerconfigs_transaction.timeout.ms",
    "A1-audit-incomplete": "#security_authz",
    "M1-mirror-acks": "#georeplication",
    "M2-errors-tolerance": "#georeplication",
    "M3-sync-topic-configs": "#georeplication",
    "M4-mirror-replication-factor": "#georeplication",
    "M5-offset-translation": "#georeplication",
    # Kafka Connect's, and Debezium's own documentation for its connectors' settings
    "K1-tolerance-without-dlq": "#sinkconnectconfigs_errors.tolerance",
    "K2-dlq-without-context": "#sinkconnectconfigs_errors.deadletterqueue.context.headers.enable",
    "K3-resnapshot": DEBEZIUM_POSTGRES_DOCS + "#postgresql-property-snapshot-mode",
    "K4-no-heartbeat": DEBEZIUM_POSTGRES_DOCS + "#postgresql-property-heartbeat-interval-ms",
    "K5-sink-auto-commit": "#connect_rest",
    "K6-sink-reset-latest": "#consumerconfigs_auto.offset.reset",
    "K7-task-failed": "#connect_rest",
}


def docs_of(rule: str) -> str:
    """The documentation a rule's advice comes from: a link the report shows beside it."""
    where = DOCS[rule]
    return where if where.startswith("https://") else KAFKA_DOCS + where


# a health finding that makes a run inconclusive: the window could not be read whole
BLOCKING = {"H2-below-min-isr", "H3-no-leader"}


def evaluate(facts: Facts, rules: list[Rule] | None = None) -> list[Risk]:
    """Every rule over the facts: risks ordered by severity, each with its fix."""
    findings: list[Risk] = []
    for rule in rules if rules is not None else RULES:
        if rule.reads_topic_config and facts.topic_config is None:
            continue  # the A1 row says what was skipped
        for hit in rule.check(facts):
            findings.append(Risk.model_validate({
                "kind": rule.kind, "rule": rule.id, "side": rule.side, "severity": rule.severity,
                "seed": rule.seed, "docs": docs_of(rule.id), "topic": facts.topic,
                "where": hit.where,
                "observed": hit.observed, "recommended": hit.recommended,
                "why": rule.why, "fix": rule.fix, "blocking": rule.id in BLOCKING,
            }))
    return sorted(findings, key=lambda f: (SEVERITY_ORDER[f.severity], f.rule))


# ------------------------------------------------------------------ facts from the cluster
def client_settings(declared: ClientProps, properties: str | None,
                    base: Path) -> dict[str, str] | None:
    if not declared and not properties:
        return None
    merged: dict[str, str] = {}
    if properties:
        path = Path(properties) if Path(properties).is_absolute() else base / properties
        if not path.exists():
            raise ConfigError(f"client properties file {path} does not exist")
        merged.update(read_properties(path))
    merged.update({k: str(v).lower() if isinstance(v, bool) else str(v)
                   for k, v in declared.items()})
    return merged


def _settled(ask: Callable[[], Any], tries: int = 15) -> Any:
    """An admin request asked until a broker answers it: a broker that has not yet seen a new
    topic answers UNKNOWN_TOPIC_OR_PART, and one that just died does not answer at all: both
    are asked again (another broker answers). A refusal (an ACL) is final."""
    from confluent_kafka import KafkaError, KafkaException

    for n in range(tries):
        try:
            return ask()
        except concurrent.futures.TimeoutError:
            if n == tries - 1:
                raise
        except KafkaException as exc:
            if exc.args[0].code() in _denied():
                raise
            if n == tries - 1 or not exc.args[0].retriable() and exc.args[0].code() not in (
                    KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._TIMED_OUT):
                raise
        time.sleep(0.3)
    return None


def _cluster_facts(tier: KafkaTier, ep: KafkaEndpoint, skipped: list[str]
                   ) -> tuple[list[dict[str, Any]], dict[str, str] | None,
                              dict[str, str] | None]:
    """The topic's partitions, its settings and a broker's; a setting the principal may not
    read is None, with the missing ACL added to `skipped`."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource, ResourceType

    from kafka_recon.sources.topic import Client, topic_metadata

    client = Client(ep, "admin")
    # plain metadata (any live broker answers), not DescribeTopics, which waits for the
    # broker the client takes for controller even when that one just died
    cluster_md, md = topic_metadata(client, tier.topic)
    partitions = [{"id": p.id, "leader": p.leader, "replicas": sorted(p.replicas),
                   "isr": sorted(p.isrs)} for p in sorted(md.partitions.values(),
                                                          key=lambda p: p.id)]
    res = ConfigResource(ResourceType.TOPIC, tier.topic)

    # routed to the broker the client takes for controller: a fresh client per attempt
    # re-reads metadata, where KRaft names a live broker
    def topic_configs() -> Any:
        with Client(ep, "admin") as fresh:
            return fresh.handle.describe_configs([res], request_timeout=5)[res].result(6)

    topic_cfg: dict[str, str] | None = None
    try:
        topic_cfg = {k: e.value for k, e in _settled(topic_configs).items()}
    except KafkaException as exc:
        if exc.args[0].code() not in _denied():
            raise
        skipped.append(f"DESCRIBE_CONFIGS on Topic:{tier.topic}")
    broker_cfg: dict[str, str] | None = {}
    # metadata may still list a broker that just died: ask the next one
    for node_id in sorted(cluster_md.brokers):
        broker = ConfigResource(ResourceType.BROKER, str(node_id))
        try:
            broker_cfg = {k: e.value for k, e in
                          client.handle.describe_configs([broker])[broker].result(5).items()}
            break
        except KafkaException as exc:
            if exc.args[0].code() in _denied():
                skipped.append("DESCRIBE_CONFIGS on Cluster:kafka-cluster")
                broker_cfg = None
                break
            continue
        except concurrent.futures.TimeoutError:
            continue
    return partitions, topic_cfg, broker_cfg


def _group_facts(tier: KafkaTier, ep: KafkaEndpoint, parts: list[int], now_ms: int
                 ) -> dict[str, dict[str, Any]]:
    """Each production group's lag on the topic and the age of the oldest record it has not
    consumed."""
    from confluent_kafka import TopicPartition

    from kafka_recon.sources.topic import _first_timestamp, committed_offsets, open_client

    groups: dict[str, dict[str, Any]] = {}
    committed = committed_offsets(ep, tier.topic, tier.consumer_groups, parts)
    consumer = open_client(ep, {"enable.auto.commit": False,
                                "group.id": f"{GROUP_PREFIX}audit-{uuid.uuid4()}"})
    try:
        for group, offsets in committed.items():
            lag, oldest, deleted = 0, None, 0
            for p, off in offsets.items():
                low, high = consumer.get_watermark_offsets(TopicPartition(tier.topic, p),
                                                           timeout=TIMEOUT_S, cached=False)
                start = low if off == NO_COMMIT else max(off, low)
                if off != NO_COMMIT and off < low:
                    deleted += low - off  # deleted before the group read them
                lag += max(0, high - start)
                if start < high:
                    ts = _first_timestamp(consumer, tier.topic, p, start)
                    if ts is not None:
                        oldest = max(oldest or 0, now_ms - ts)
            groups[group] = {"lag": lag, "oldest_unconsumed_age_ms": oldest,
                             "deleted_unread": deleted}
    finally:
        consumer.close()
    return groups


def gather_facts(tier: KafkaTier, base: Path, now_ms: int | None = None,
                 ep: KafkaEndpoint | None = None) -> Facts:
    """What the rules read of one topic: its partitions and settings, a broker's settings,
    its production groups' lag, and its clients' declared settings."""
    from confluent_kafka import KafkaException

    ep = ep or endpoint(tier)
    skipped: list[str] = []
    try:
        partitions, topic_cfg, broker_cfg = _cluster_facts(tier, ep, skipped)
    except (KafkaException, concurrent.futures.TimeoutError) as exc:
        raise TopicError(f"topic '{tier.topic}' on {ep.where}: "
                         f"{exc or 'no answer'}") from exc
    now_ms = now_ms or int(time.time() * 1000)
    parts = [p["id"] for p in partitions]
    groups = _group_facts(tier, ep, parts, now_ms)
    return Facts(tier.topic, partitions, topic_cfg, broker_cfg, groups,
                 client_settings(tier.producer, tier.producer_properties, base),
                 client_settings(tier.consumer, tier.consumer_properties, base), skipped,
                 _transactions(tier, ep, parts), now_ms)


def _transactions(tier: KafkaTier, ep: KafkaEndpoint, parts: list[int]
                  ) -> list[OpenTransaction]:
    """The transactions open on the topic (the Admin API asked only where a partition's last
    stable offset lags its high watermark; none when it cannot be asked)."""
    from kafka_recon.cluster.transactions import open_transactions, stable_offsets

    try:
        held = [p for p, (lso, hw) in stable_offsets(ep, tier.topic, parts).items()
                if lso < hw]
        return open_transactions(ep, tier.topic, held) if held else []
    except TopicError:  # a partition without a leader: H3 names it
        return []


def audit_flow(flow: Flow, config_dir: Path, ep: KafkaEndpoint | None = None,
               connectors: Connectors | None = None) -> Audit:
    """Every topic's audit (`ep`: the first topic's endpoint, when the caller has one), each
    risk tagged with its topic tier; a mirror's settings when its properties are given; each
    Kafka Connect connector's config and tasks, as `connectors` read them."""
    out: list[Risk] = [r for c in (connectors.connectors if connectors else [])
                       for r in audit_connector(c, flow)]
    for tier in flow.kafka_tiers:
        found = evaluate(gather_facts(tier, config_dir,
                                      ep=ep if tier is flow.topic_tier else None))
        if tier.mirror_properties:
            found += audit_mirror(tier, config_dir)
        out += [f.model_copy(update={"tier": tier.name}) for f in found]
    return Audit(risks=sorted(out, key=lambda f: SEVERITY_ORDER[f.severity]))


# ------------------------------------------------------------------ a mirror's settings
def mirror_setting(props: dict[str, str], source: str, target: str, key: str) -> str | None:
    """A MirrorMaker 2 setting for the replication source->target: the flow's own
    (`A->B.key`) wins over the top-level one."""
    return props.get(f"{source}->{target}.{key}", props.get(key))


def _mirror_rules(props: dict[str, str], source: str, target: str
                  ) -> list[tuple[str, str, str, str, str, str]]:
    """(rule, severity, observed, recommended, why, fix) for each risky setting."""
    def get(key: str) -> str | None:
        return mirror_setting(props, source, target, key)

    hits = []
    acks = next((v for v in (get("producer.override.acks"), props.get(f"{target}.producer.acks"),
                             get("producer.acks")) if v is not None), None)
    if acks is not None and acks not in ("all", "-1"):
        hits.append(("M1-mirror-acks", "high", f"acks={acks}", "acks=all",
                     "The mirror's producer to the target cluster does not wait for every "
                     "in-sync replica: a leader change on the target loses mirrored records.",
                     f"Set {target}.producer.acks=all (or remove the override)."))
    if (get("errors.tolerance") or "none").lower() == "all":
        hits.append(("M2-errors-tolerance", "high", "errors.tolerance=all",
                     "errors.tolerance=none",
                     "The mirror skips records it fails to convert or write, and says so only "
                     "in its log: a silent loss on the replication hop.",
                     "Remove errors.tolerance=all; let the mirror stop on a failing record."))
    if (get("sync.topic.configs.enabled") or "true").lower() == "false":
        hits.append(("M3-sync-topic-configs", "medium", "sync.topic.configs.enabled=false",
                     "sync.topic.configs.enabled=true",
                     "The target topic does not follow the source's retention and size "
                     "settings: records the source accepts may be refused or deleted early on "
                     "the target.", "Set sync.topic.configs.enabled=true."))
    rf = get("replication.factor")
    # MirrorMaker 2 creates target topics with 2 replicas unless told otherwise
    if _int(rf, 2) < 3:
        hits.append(("M4-mirror-replication-factor", "medium",
                     f"replication.factor={rf or '2 (the default)'}", "replication.factor=3",
                     "The topics the mirror creates on the target have fewer than 3 replicas: "
                     "one broker lost leaves no room for another failure.",
                     "Set replication.factor=3 for the mirror's target topics."))
    if (get("emit.checkpoints.enabled") or "true").lower() == "false" \
            or (get("sync.group.offsets.enabled") or "false").lower() != "true":
        hits.append(("M5-offset-translation", "low",
                     f"emit.checkpoints.enabled={get('emit.checkpoints.enabled') or 'true'}, "
                     f"sync.group.offsets.enabled={get('sync.group.offsets.enabled') or 'false'}",
                     "emit.checkpoints.enabled=true, sync.group.offsets.enabled=true",
                     "Consumers failing over to the target cluster get no translated offsets: "
                     "they restart from the start (duplicates) or the end (loss) of the topic.",
                     "Enable checkpoints and group offset sync for the groups that may fail "
                     "over."))
    return hits


def audit_mirror(tier: KafkaTier, config_dir: Path) -> list[Risk]:
    """The audit of a mirror's own settings (its mm2.properties), on the replication hop into
    `tier` (`kafka_recon.cluster.mirror.replication` finds which replication it is)."""
    from kafka_recon.cluster.mirror import replication

    props, source, target = replication(tier, config_dir)
    where = f"{Path(tier.mirror_properties or '').name} ({source}->{target})"
    return [Risk(kind="config_risk", rule=rule, side="replication", severity=sev,
                 seed="000,004", docs=docs_of(rule), topic=tier.topic, where=where,
                 observed=observed,
                 recommended=recommended, why=why, fix=fix, blocking=False)
            for rule, sev, observed, recommended, why, fix in _mirror_rules(props, source, target)]


# ------------------------------------------------------------------ Kafka Connect connectors
def _connector_rules(c: ConnectorSnapshot) -> list[tuple[str, str, str, str, str, str]]:
    """(rule, severity, observed, recommended, why, fix) for each risky connector setting."""
    cfg, hits = c.config, []
    if c.role == "sink":
        if c.tolerance == "all" and not c.dead_letter_topic:
            hits.append(("K1-tolerance-without-dlq", "high", "errors.tolerance=all, no "
                         "errors.deadletterqueue.topic.name", "a dead-letter queue, or "
                         "errors.tolerance=none",
                         "The sink skips every record it cannot convert, transform or write, "
                         "and keeps no copy: each is lost on the consume side, seen only in "
                         "its log (errors.log.enable).",
                         "Set errors.deadletterqueue.topic.name (and its context headers), or "
                         "errors.tolerance=none so the task stops on a bad record."))
        if c.dead_letter_topic and not c.context_headers:
            hits.append(("K2-dlq-without-context", "medium",
                         "errors.deadletterqueue.context.headers.enable=false",
                         "errors.deadletterqueue.context.headers.enable=true",
                         "Records in the dead-letter queue carry no error, original topic, "
                         "partition or offset: nobody can tell why they failed.",
                         "Set errors.deadletterqueue.context.headers.enable=true."))
        if cfg.get("consumer.override.enable.auto.commit", "").lower() == "true":
            hits.append(("K5-sink-auto-commit", "high",
                         "consumer.override.enable.auto.commit=true",
                         "no override (Connect commits after the task's flush)",
                         "The sink's consumer commits offsets on a timer, whatever the task "
                         "has written: a crash loses what was committed but not written.",
                         "Remove consumer.override.enable.auto.commit."))
        if cfg.get("consumer.override.auto.offset.reset", "").lower() == "latest":
            hits.append(("K6-sink-reset-latest", "medium",
                         "consumer.override.auto.offset.reset=latest",
                         "auto.offset.reset=earliest (Connect's default for sinks)",
                         "When the sink's group has no committed offset (new, expired or "
                         "deleted), it starts at the end of the topic: every record before is "
                         "skipped.", "Remove consumer.override.auto.offset.reset."))
    debezium = cfg.get("connector.class", "").startswith("io.debezium.")
    if c.role == "source" and debezium:
        mode = cfg.get("snapshot.mode", "initial").lower()
        if mode in ("always", "initial", "when_needed"):
            hits.append(("K3-resnapshot", "medium" if mode == "always" else "low",
                         f"snapshot.mode={mode}" + ("" if "snapshot.mode" in cfg
                                                    else " (the default)"),
                         "snapshot.mode=no_data once the first snapshot is done, or keep the "
                         "offsets topic safe",
                         "The connector snapshots every table again when its offsets are "
                         "missing" + (" and at every start" if mode == "always" else "")
                         + ": each row is written to the topic once more (write-side "
                         "duplicates).",
                         "Protect the Connect cluster's offset topic (replication, no manual "
                         "deletes); make the sink idempotent (upsert by id)."))
        if int(cfg.get("heartbeat.interval.ms", "0") or 0) <= 0:
            hits.append(("K4-no-heartbeat", "low", "heartbeat.interval.ms=0 (no heartbeats)",
                         "heartbeat.interval.ms=10000",
                         "On quiet tables the connector commits no newer position: the "
                         "replication slot holds back the database's WAL, and a restart "
                         "re-reads changes already sent.",
                         "Set heartbeat.interval.ms (and heartbeat.action.query for PostgreSQL "
                         "databases whose other tables are busy)."))
    for t in c.failed:
        hits.append(("K7-task-failed", "high", t.said, "every task RUNNING",
                     f"Connector '{c.name}' has stopped moving records: those after the "
                     "offset it stopped at are not moved until it is restarted.",
                     f"Read the trace, fix its cause, then restart the task "
                     f"(POST /connectors/{c.name}/tasks/{max(t.id, 0)}/restart)."))
    return hits


def audit_connector(c: ConnectorSnapshot, flow: Flow) -> list[Risk]:
    """The audit of one connector's config and tasks, on the hop it moves records along: a
    source's into its topic (write side), a sink's out of the topic before it (consume)."""
    topic = flow.loaded_topic(c.tier) if c.role == "sink" \
        else next(t for t in flow.tiers if t.name == c.tier)
    where = f"connector '{c.name}' at {c.cluster}"
    return [Risk(kind="health" if rule == "K7-task-failed" else "config_risk", rule=rule,
                 side="consume" if c.role == "sink" else "write", severity=sev,
                 seed="000,004", docs=docs_of(rule),
                 topic=getattr(topic, "topic", None), where=where, observed=observed,
                 recommended=recommended, why=why, fix=fix, blocking=False, tier=c.tier)
            for rule, sev, observed, recommended, why, fix in _connector_rules(c)]
