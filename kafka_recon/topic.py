"""Topic facts through the Kafka protocol: partitions and the offsets a window spans.

Offsets are found by timestamp (start, and end plus grace) so Spark reads exactly the window's
records; the difference of those offsets is the quick estimate, never the verdict (transaction
markers and compaction leave gaps in offsets).
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from typing import Any

TIMEOUT_S = 15.0


class TopicError(RuntimeError):
    pass


@dataclass(frozen=True)
class PartitionRange:
    partition: int
    start: int          # first offset at or after the window start
    end: int            # first offset at or after the window end plus grace (exclusive)
    log_start: int      # earliest offset still on the broker
    high_watermark: int


def window_offsets(bootstrap: str, topic: str, start_ms: int, end_ms: int) -> list[PartitionRange]:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    # a throwaway group id: librdkafka wants one, but this consumer never joins or commits
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"kafka-recon-offsets-{uuid.uuid4()}",
        "enable.auto.commit": False,
        "socket.timeout.ms": int(TIMEOUT_S * 1000),
        "log_level": 3,
    })
    try:
        try:
            md = consumer.list_topics(topic, timeout=TIMEOUT_S)
        except KafkaException as exc:
            raise TopicError(f"kafka at {bootstrap} cannot be reached: {exc}") from exc
        tmd = md.topics.get(topic)
        if tmd is None or tmd.error is not None or not tmd.partitions:
            raise TopicError(f"topic '{topic}' does not exist on kafka at {bootstrap}")
        parts = sorted(tmd.partitions)
        starts = consumer.offsets_for_times(
            [TopicPartition(topic, p, start_ms) for p in parts], timeout=TIMEOUT_S)
        ends = consumer.offsets_for_times(
            [TopicPartition(topic, p, end_ms) for p in parts], timeout=TIMEOUT_S)
        out = []
        for p, s, e in zip(parts, starts, ends, strict=True):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                       timeout=TIMEOUT_S, cached=False)
            # -1: no record at or after that time, so the range runs to the log end
            out.append(PartitionRange(p, high if s.offset < 0 else s.offset,
                                      high if e.offset < 0 else e.offset, low, high))
        return out
    except KafkaException as exc:
        raise TopicError(f"topic '{topic}' on kafka at {bootstrap}: {exc}") from exc
    finally:
        consumer.close()


def spark_offsets(topic: str, ranges: list[PartitionRange]) -> tuple[str, str]:
    """startingOffsets / endingOffsets JSON for Spark's Kafka source."""
    import json

    start = {topic: {str(r.partition): r.start for r in ranges}}
    end = {topic: {str(r.partition): r.end for r in ranges}}
    return json.dumps(start), json.dumps(end)


def as_json(ranges: list[PartitionRange]) -> list[dict[str, Any]]:
    return [asdict(r) for r in ranges]
