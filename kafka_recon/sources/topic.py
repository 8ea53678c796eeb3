"""Topic facts through the Kafka protocol: partitions, the offsets a window spans, retention.

Offsets are found by timestamp (start, and end plus grace) so Spark reads exactly the window's
records; the difference of those offsets is the quick estimate, never the verdict (transaction
markers and compaction leave gaps in offsets). Only metadata passes through here, never records.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from kafka_recon.errors import TopicError
from kafka_recon.sources.kafka_client import Diagnosis, KafkaEndpoint

if TYPE_CHECKING:
    from kafka_recon.config import Flow, KafkaTier
    from kafka_recon.window import Window

TIMEOUT_S = 15.0
NO_COMMIT = -1001  # librdkafka's OFFSET_INVALID: the group never committed this partition


@dataclass(frozen=True)
class PartitionRange:
    partition: int
    start: int            # first offset at or after the window start
    end: int              # first offset at or after the window end plus grace (exclusive)
    log_start: int        # earliest offset still on the broker
    high_watermark: int
    first_timestamp: int | None = None  # ms, of the record at log_start when log_start > 0
    # why the range ends where it does when not where the time lookup said: it was carried to
    # the readable end of the log (transaction markers, out-of-order timestamps)
    why: str | None = None


# the prefix of every group id kafka-recon's clients use (docs/cluster.md, "The preflight, and
# the ACLs to grant": the one group ACL kafka-recon needs is a prefixed one on it)
GROUP_PREFIX = "kafka-recon-"


def open_client(ep: KafkaEndpoint, own: dict[str, Any], diagnosis: Any = None,
                admin: bool = False) -> Any:
    """A confluent-kafka consumer (or admin client) of the endpoint; a setting librdkafka
    refuses is a TopicError naming it, not a traceback."""
    from confluent_kafka import Consumer, KafkaException
    from confluent_kafka.admin import AdminClient

    try:
        return (AdminClient if admin else Consumer)(ep.librdkafka(own, diagnosis))
    except (KafkaException, ValueError, TypeError) as exc:
        err = exc.args[0] if exc.args else exc
        raise TopicError(f"{ep.where}: the client settings are refused: "
                          f"{getattr(err, 'str', lambda: str(err))()}") from None


class TopicDenied(TopicError):
    """The principal may not describe the topic (DESCRIBE on Topic:<topic>)."""


class TopicMissing(TopicError):
    """The cluster has no such topic (a rename, a typo, a deletion): a configuration fact that
    makes a run inconclusive, never a loss of every record (and never a topic created by
    asking, `kafka_client.NO_AUTO_CREATE`)."""

    def __init__(self, topic: str, where: str, detail: str = "") -> None:
        self.topic = topic
        super().__init__(f"topic '{topic}' does not exist on the cluster ({where})"
                         + (f": {detail}" if detail else ""))


class Client:
    """A confluent-kafka client of an endpoint, with what its error callback heard."""

    def __init__(self, ep: KafkaEndpoint, kind: str = "consumer", **own: Any) -> None:
        self.ep, self.diagnosis = ep, Diagnosis()
        if kind == "admin":
            self.handle: Any = open_client(ep, own, self.diagnosis, admin=True)
        else:
            # a throwaway group id: librdkafka wants one, but this consumer never joins or
            # commits
            self.handle = open_client(ep, {
                "group.id": f"{GROUP_PREFIX}facts-{uuid.uuid4()}", "enable.auto.commit": False,
                "socket.timeout.ms": int(TIMEOUT_S * 1000), **own}, self.diagnosis)

    def close(self) -> None:
        if hasattr(self.handle, "close"):
            self.handle.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def unreachable(self, exc: object) -> TopicError:
        """Why the cluster could not be used: authentication, TLS, or not reached at all."""
        self.handle.poll(0)  # serves the error callback
        return TopicError(self.diagnosis.fatal(self.ep)
                          or f"{self.ep.where} cannot be reached: {exc}")


def topic_metadata(client: Client, topic: str, settle_s: float = 10.0,
                   leaderless: bool = False) -> tuple[Any, Any]:
    """(cluster metadata, topic metadata) once a broker answers with the topic whole.

    A new topic's metadata reaches brokers one by one, and a leader election leaves partitions
    briefly leaderless: those answers are retried for a few seconds before the topic is called
    missing. A client that cannot authenticate fails at once with the reason, not a timeout.
    `leaderless` takes a topic whose partitions have no leader as it is (the flight recorder
    is there to see exactly that).
    """
    import time

    from confluent_kafka import KafkaError, KafkaException

    ep = client.ep
    deadline = time.monotonic() + settle_s
    reach_by = time.monotonic() + TIMEOUT_S
    while True:
        try:
            md = client.handle.list_topics(topic, timeout=2.0)
        except KafkaException as exc:
            client.handle.poll(0)
            if client.diagnosis.fatal(ep) or time.monotonic() > reach_by:
                raise client.unreachable(exc) from exc
            continue
        tmd = md.topics.get(topic)
        if tmd is not None and tmd.partitions and (tmd.error is None or leaderless and (
                tmd.error.code() == KafkaError.LEADER_NOT_AVAILABLE)):
            return md, tmd
        if tmd is not None and tmd.error is not None \
                and tmd.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            raise TopicDenied(f"{ep.where}: not authorised to describe topic '{topic}' "
                              f"(missing ACL: DESCRIBE on Topic:{topic})")
        if time.monotonic() > deadline:
            raise TopicMissing(topic, ep.where, tmd.error.str() if tmd is not None and tmd.error
                               else "")
        time.sleep(0.3)


def partitions(client: Client, topic: str) -> list[int]:
    """The topic's partition ids."""
    return sorted(topic_metadata(client, topic)[1].partitions)


def topic_exists(ep: KafkaEndpoint, topic: str) -> bool:
    """Whether the cluster shows the topic to this principal, from one metadata answer about
    it alone (no wait for a topic being created: one that is not there yet is not there). The
    asking client never has a topic created by asking. A topic the principal may not
    describe is not there for it (Kafka does not tell such a principal whether it exists); one
    there without a leader for the moment is there."""
    from confluent_kafka import KafkaError, KafkaException

    with Client(ep, "consumer") as client:
        try:
            md = client.handle.list_topics(topic, timeout=TIMEOUT_S)
        except KafkaException as exc:
            raise client.unreachable(exc) from exc
    tmd = md.topics.get(topic)
    absent = (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    return tmd is not None and (tmd.error is None or tmd.error.code() not in absent)


def check_topic(ep: KafkaEndpoint, topic: str) -> list[int]:
    """The topic's partitions; TopicError naming the broker or topic when it cannot be read."""
    with Client(ep) as client:
        return partitions(client, topic)


def _first_timestamp(consumer: Any, topic: str, partition: int, offset: int) -> int | None:
    from confluent_kafka import TopicPartition

    consumer.assign([TopicPartition(topic, partition, offset)])
    try:
        msg = consumer.poll(TIMEOUT_S)
        if msg is None or msg.error() is not None:
            return None
        return int(msg.timestamp()[1])
    finally:
        consumer.unassign()


def _verified_ends(consumer: Any, topic: str, found: dict[int, tuple[int, int]],
                   end_ms: int) -> dict[int, tuple[int, str | None]]:
    """Each partition's end the time lookup found (`found`: partition -> (end, high), `end`
    the first offset stamped at or after `end_ms`, `high` the last stable offset), checked
    against the first record a read_committed reader meets from it.

    The lookup cannot be trusted past a transaction marker (a control batch stamped with the
    broker's clock, not the producer's) or an out-of-order timestamp (a backfill stamped with
    event times, a skewed clock): records after it may be stamped before `end_ms`. When the
    first readable record from `end` is stamped before `end_ms`, or nothing but markers and
    aborted records lie between `end` and `high`, the range runs to `high`, and says why. The
    partitions are read at once: one fetch each, side by side."""
    import time

    from confluent_kafka import TopicPartition

    out: dict[int, tuple[int, str | None]] = {}
    consumer.assign([TopicPartition(topic, p, end) for p, (end, _) in found.items()])
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while len(out) < len(found) and time.monotonic() < deadline:
            for msg in consumer.consume(len(found) * 8, 0.1):
                p = msg.partition()
                if msg.error() is not None or p in out or p not in found:
                    continue
                end, high = found[p]
                out[p] = (end, None) if int(msg.timestamp()[1]) >= end_ms else (high, (
                    f"the first record read from offset {end}, the end found by timestamp, is "
                    f"at offset {msg.offset()} and stamped before it (transaction markers or "
                    f"out-of-order timestamps): read to the last stable offset {high}"))
            waiting = [TopicPartition(topic, p) for p in found if p not in out]
            for tp in consumer.position(waiting) if waiting else []:
                end, high = found[tp.partition]
                if tp.offset >= high:
                    out[tp.partition] = (high, (
                        f"only transaction markers or aborted records from offset {end} (the "
                        f"end found by timestamp) to the last stable offset {high}: read to it"))
        for p, (end, high) in found.items():
            out.setdefault(p, (high, f"no record could be read from offset {end} within "
                                     f"{TIMEOUT_S:.0f} s: read to the last stable offset {high}"))
        return out
    finally:
        consumer.unassign()


def window_offsets(ep: KafkaEndpoint, topic: str, start_ms: int, end_ms: int,
                   verify_end: bool = False) -> list[PartitionRange]:
    """Each partition's offsets from the first record stamped at or after `start_ms` to the
    first stamped at or after `end_ms` (a read_committed view: the high watermark is the last
    stable offset). `verify_end`: each end checked against the records after it
    (`_verified_ends`), as a replay's read must be."""
    from confluent_kafka import KafkaException, TopicPartition

    client = Client(ep)
    consumer = client.handle
    try:
        parts = partitions(client, topic)
        starts = consumer.offsets_for_times(
            [TopicPartition(topic, p, start_ms) for p in parts], timeout=TIMEOUT_S)
        ends = consumer.offsets_for_times(
            [TopicPartition(topic, p, end_ms) for p in parts], timeout=TIMEOUT_S)
        out = []
        for p, s, e in zip(parts, starts, ends, strict=True):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                       timeout=TIMEOUT_S, cached=False)
            first = _first_timestamp(consumer, topic, p, low) if low > 0 and low < high else None
            # -1: no record at or after that time, so the range runs to the log end
            out.append(PartitionRange(p, high if s.offset < 0 else s.offset,
                                      high if e.offset < 0 else e.offset, low, high, first))
        if verify_end and (found := {r.partition: (r.end, r.high_watermark) for r in out
                                     if r.end < r.high_watermark}):
            checked = _verified_ends(consumer, topic, found, end_ms)
            out = [replace(r, end=checked[r.partition][0], why=checked[r.partition][1])
                   if r.partition in checked else r for r in out]
        return out
    except KafkaException as exc:
        raise TopicError(f"topic '{topic}' on {ep.where}: {exc}") from exc
    finally:
        client.close()


def read_ranges(ep: KafkaEndpoint, flow: Flow, tier: KafkaTier, window: Window
                ) -> list[PartitionRange]:
    """The offsets a replay reads: the topic's window, closing at its own grace, widened on
    both sides by the flow's disorder margin (found by Kafka timestamp)."""
    from dataclasses import replace

    from kafka_recon.window import Window

    window = replace(window, grace=flow.grace_of(tier))
    return window_offsets(ep, tier.topic, Window.millis(window.start - flow.disorder),
                          Window.millis(window.closes_at + flow.disorder), verify_end=True)


def retention_cut(ranges: list[PartitionRange], start_ms: int) -> list[int]:
    """Partitions where retention may have deleted records of the window.

    Records before log_start are gone; if the oldest record left is already inside the window
    (or later), the deleted ones may have been too, and nothing can tell how many.
    """
    return [r.partition for r in ranges
            if r.log_start > 0 and (r.first_timestamp is None or r.first_timestamp >= start_ms)]


class GroupDenied(TopicError):
    """The principal may not describe a consumer group (DESCRIBE on Group:<group>)."""


def group_committed(ep: KafkaEndpoint, topic: str, group: str, parts: list[int],
                    ask_s: float = TIMEOUT_S) -> list[Any]:
    """A group's committed offsets (TopicPartitions), by an OffsetFetch through a consumer
    that never subscribes: it does not join the group and never commits.

    (AdminClient.list_consumer_group_offsets crashes the process, in confluent-kafka 2.16,
    when the coordinator answers NOT_COORDINATOR.) A group the principal may not describe is
    a `GroupDenied`: librdkafka refuses its coordinator lookup and only times the fetch out,
    so the refusal is read from the consumer's queue.
    """
    import time

    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    waiting = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
               KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError._TIMED_OUT}
    consumer = open_client(ep, {"group.id": group, "enable.auto.commit": False})
    try:
        deadline = time.monotonic() + 3 * TIMEOUT_S
        while True:
            try:
                res = consumer.committed([TopicPartition(topic, p) for p in parts],
                                         timeout=ask_s)
                break
            except KafkaException as exc:
                code = exc.args[0].code()
                if code == KafkaError.GROUP_AUTHORIZATION_FAILED or _refused(consumer):
                    raise GroupDenied(f"{ep.where}: not authorised to read consumer group "
                                      f"'{group}' (missing ACL: DESCRIBE on Group:{group}); "
                                      "without its committed offsets the run is "
                                      "inconclusive") from exc
                if code not in waiting or time.monotonic() > deadline:
                    raise TopicError(f"consumer group '{group}' on {ep.where}: "
                                     f"{exc}") from exc
                time.sleep(0.5)  # the group coordinator is still loading
    finally:
        consumer.close()
    denied = [tp for tp in res if tp.error is not None]
    if denied:
        raise TopicError(f"consumer group '{group}' on {ep.where}: {denied[0].error} "
                         f"for partition {denied[0].partition}")
    return list(res)


def _refused(consumer: Any) -> bool:
    from confluent_kafka import KafkaError

    msg = consumer.poll(0.5)
    return msg is not None and msg.error() is not None \
        and msg.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def committed_offsets(ep: KafkaEndpoint, topic: str, groups: list[str],
                      parts: list[int]) -> dict[str, dict[int, int]]:
    """Each production group's committed offset per partition (NO_COMMIT if none)."""
    return {group: {tp.partition: tp.offset for tp in group_committed(ep, topic, group, parts)}
            for group in groups}


def deleted_before_consumed(ranges: list[PartitionRange],
                            committed: dict[str, dict[int, int]]) -> dict[str, int]:
    """Per group, offsets deleted by retention before the group consumed them."""
    log_start = {r.partition: r.log_start for r in ranges}
    out = {}
    for group, offsets in committed.items():
        lost = sum(log_start.get(p, 0) - off for p, off in offsets.items()
                   if off != NO_COMMIT and off < log_start.get(p, 0))
        if lost:
            out[group] = lost
    return out


def as_json(ranges: list[PartitionRange]) -> list[dict[str, Any]]:
    return [asdict(r) for r in ranges]


def ensure_topic(ep: KafkaEndpoint, topic: str, partitions_wanted: int) -> int:
    """The topic's partition count, after creating it with `partitions_wanted` partitions
    (the cluster's default replication) when it does not exist. TopicError naming the topic
    and the broker's answer when it cannot be created (an ACL: CREATE on Topic)."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    try:
        return len(check_topic(ep, topic))
    except TopicDenied:
        raise
    except TopicError:
        pass
    admin = AdminClient(ep.librdkafka())
    future = admin.create_topics([NewTopic(topic, partitions_wanted)],
                                 request_timeout=TIMEOUT_S)[topic]
    try:
        future.result(TIMEOUT_S)
    except KafkaException as exc:
        err = exc.args[0]
        if err.code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise TopicError(f"{ep.where}: cannot create topic '{topic}': {err.str()}"
                             + (" (missing ACL: CREATE on Topic or Cluster)"
                                if err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
                                else "")) from None
    return len(check_topic(ep, topic))
