"""kafka-recon's window reader (jvm/src) returns exactly the records of its offset ranges, as
Spark's own Kafka source does, and fails rather than return part of a window."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness.services.kafka import KafkaCluster, StageProducer
from kafka_recon.sources.kafka_client import KafkaEndpoint
from kafka_recon.sources.topic import PartitionRange
from kafka_recon.spark.replay import read_window

pytestmark = pytest.mark.integration

COLUMNS = ["key", "value", "partition", "offset", "timestamp"]


def topic_with_transactions(kafka: KafkaCluster, partitions: int) -> str:
    """Plain records (some without a key), one committed and one aborted transaction, then
    plain records again: the offsets have gaps (markers), and aborted records sit among them."""
    topic = f"reader-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(30)
    plain = StageProducer(kafka.bootstrap)
    # timestamps of now: the broker's retention (checked every 5 s) deletes older ones at once
    now = int(time.time() * 1000)
    for i in range(120):
        plain.produce(topic, key=None if i % 7 == 0 else f"k{i}", value=f"plain-{i}",
                      partition=i % partitions, timestamp=now + i)
    plain.flush()
    tx = Producer({"bootstrap.servers": kafka.bootstrap,
                   "transactional.id": f"reader-test-{uuid.uuid4().hex[:6]}"})
    tx.init_transactions(30)
    for outcome in ("commit", "abort"):
        tx.begin_transaction()
        for i in range(40):
            tx.produce(topic, key=f"{outcome}-{i}", value=f"{outcome}-{i}",
                       partition=i % partitions)
        tx.flush(30)
        (tx.commit_transaction if outcome == "commit" else tx.abort_transaction)(30)
    for i in range(120, 150):
        plain.produce(topic, key=f"k{i}", value=f"plain-{i}", partition=i % partitions)
    plain.flush()
    return topic


def ranges_of(kafka: KafkaCluster, topic: str, partitions: int) -> list[PartitionRange]:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "kafka-recon-test"})
    try:
        out = []
        for p in range(partitions):
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            out.append(PartitionRange(p, low, high, low, high))
        return out
    finally:
        c.close()


def rows(df: Any) -> list[tuple[Any, ...]]:
    """Every record read, in (partition, offset) order."""
    return sorted(((None if r["key"] is None else bytes(r["key"]), bytes(r["value"]),
                    r["partition"], r["offset"], r["timestamp"])
                   for r in df.select(*COLUMNS).collect()), key=lambda t: (t[2], t[3]))


def spark_source(spark: Any, kafka: KafkaCluster, topic: str, ranges: list[PartitionRange],
                 isolation: str) -> Any:
    import json

    def offsets(which: str) -> str:
        return json.dumps({topic: {str(r.partition): getattr(r, which) for r in ranges}})

    return (spark.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
            .option("subscribe", topic).option("startingOffsets", offsets("start"))
            .option("endingOffsets", offsets("end")).option("kafka.isolation.level", isolation)
            .option("failOnDataLoss", "true").load())


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_the_window_reader_returns_the_records_sparks_kafka_source_returns(
        kafka: KafkaCluster, spark: Any, isolation: str) -> None:
    topic = topic_with_transactions(kafka, partitions=3)
    ranges = ranges_of(kafka, topic, 3)
    # a window that starts and ends inside the partitions, as a day's does
    window = [PartitionRange(r.partition, r.start + 3, r.end - 2, r.log_start, r.high_watermark)
              for r in ranges]
    ep = KafkaEndpoint(kafka.bootstrap)
    expected = rows(spark_source(spark, kafka, topic, window, isolation))
    got = rows(read_window(spark, ep, topic, window, "kafka-recon-test-reader", isolation))
    assert got == expected
    values = {r[1] for r in got}
    # records from before, in and after the transactions, keyed and not
    assert {b"plain-14", b"commit-0", b"plain-120"} <= values and None in {r[0] for r in got}
    assert (b"abort-0" in values) == (isolation == "read_uncommitted")


@pytest.mark.parametrize("tasks", [1, 2, 5])
def test_the_window_reader_deals_partitions_and_slices_to_tasks_without_losing_a_record(
        kafka: KafkaCluster, spark: Any, tasks: int) -> None:
    # two partitions for up to five tasks: a partition is cut into slices of offsets
    topic = topic_with_transactions(kafka, partitions=2)
    ranges = ranges_of(kafka, topic, 2)
    ep = KafkaEndpoint(kafka.bootstrap)
    expected = rows(spark_source(spark, kafka, topic, ranges, "read_committed"))
    df = (spark.read.format("kafkarecon.spark.KafkaWindowSource")
          .option("kafka.bootstrap.servers", ep.bootstrap).option("topic", topic)
          .option("ranges", ",".join(f"{r.partition}:{r.start}:{r.end}" for r in ranges))
          .option("groupId", "kafka-recon-test-reader").option("tasks", str(tasks))
          .option("kafka.isolation.level", "read_committed").load())
    assert df.rdd.getNumPartitions() == tasks
    assert rows(df) == expected


def test_a_range_whose_records_retention_deleted_fails_the_read(
        kafka: KafkaCluster, spark: Any) -> None:
    topic = topic_with_transactions(kafka, partitions=1)
    [r] = ranges_of(kafka, topic, 1)
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for fut in admin.delete_records([TopicPartition(topic, 0, 10)]).values():
        fut.result(30)
    with pytest.raises(Exception, match="(?i)out of range"):
        read_window(spark, KafkaEndpoint(kafka.bootstrap), topic, [r],
                    "kafka-recon-test-reader", "read_uncommitted").count()


def test_a_range_past_the_log_end_fails_naming_the_partition_and_offsets(
        kafka: KafkaCluster, spark: Any) -> None:
    topic = topic_with_transactions(kafka, partitions=1)
    [r] = ranges_of(kafka, topic, 1)
    beyond = PartitionRange(0, r.start, r.end + 5, r.log_start, r.high_watermark)
    df = (spark.read.format("kafkarecon.spark.KafkaWindowSource")
          .option("kafka.bootstrap.servers", kafka.bootstrap).option("topic", topic)
          .option("ranges", f"0:{beyond.start}:{beyond.end}")
          .option("groupId", "kafka-recon-test-reader").option("pollTimeoutMs", "1500").load())
    with pytest.raises(Exception, match=rf"{topic}-0 at offset {r.end}, range end {beyond.end}, "
                                        rf"log end {r.end}"):
        df.count()


def test_a_malformed_range_is_refused_with_the_range_named(spark: Any) -> None:
    df = (spark.read.format("kafkarecon.spark.KafkaWindowSource")
          .option("kafka.bootstrap.servers", "127.0.0.1:1").option("topic", "t")
          .option("ranges", "0:5").option("groupId", "g").load())
    with pytest.raises(Exception, match="range '0:5' is not partition:start:end"):
        df.count()
