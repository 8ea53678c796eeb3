"""A topic's repair topic: where a window's lost records are published again
(`kafka_recon.spark.repair`), read back as the ledger of what was re-delivered and, for the
write-side records, counted by a later run of their window as the topic's own
(`kafka_recon.spark.replay`)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from kafka_recon.config import Flow, KafkaTier
from kafka_recon.runfolder import RunFolder
from kafka_recon.window import Window

# the headers every re-delivered record carries: where it was in the flow's topic (a topic's
# copy) or which upstream id it is (a write-side row), and which plan sent it. They are also
# the ledger: a record is re-delivered once, whatever plans name it
H_FLOW, H_WINDOW, H_PLAN = "kafka-recon-flow", "kafka-recon-window", "kafka-recon-plan"
H_PARTITION, H_OFFSET, H_TIMESTAMP = ("kafka-recon-partition", "kafka-recon-offset",
                                      "kafka-recon-timestamp")
H_ID = "kafka-recon-id"


def repair_topic(flow: Flow, tier: KafkaTier) -> str:
    """Where a topic's lost records are re-delivered: the topic itself with `repair.to:
    topic`, else the flow's `repair.topics` for the tier, else `<topic>.kafka-recon-repair`."""
    if flow.repair.to == "topic":
        return tier.topic
    return flow.repair.topics.get(tier.name, f"{tier.topic}.kafka-recon-repair")


def copies_since(flow: Flow, window: Window) -> datetime | None:
    """Where the records re-delivered for a window's records begin, when they go back onto
    the flow's own topic: a record is re-delivered after its window closed, so its copy is
    stamped after the window began (less the flow's disorder margin, for producers' clocks).
    None for a repair topic, which is read whole."""
    return window.start - flow.disorder if flow.repair.to == "topic" else None


def _header(name: str) -> Column:
    # get(): null where a record lacks the header (ANSI mode fails an index out of bounds)
    return F.expr(f"cast(get(filter(headers, h -> h.key = '{name}'), 0).value as string)")


def _of_flow(repaired: DataFrame, flow: str) -> DataFrame:
    # the flow's records, whatever window's plan sent them: windows may overlap (an hour
    # planned ad hoc, then its day), a record never does
    return repaired.where(_header(H_FLOW) == flow)


def already_delivered(repaired: DataFrame, flow: str) -> DataFrame:
    """(partition, offset) in the flow's topic of every record a repair topic holds for this
    flow, from its committed records' headers; a record with other headers is someone else's
    and not counted (try_cast: a foreign header never fails the read)."""
    return (_of_flow(repaired, flow)
            .select(_header(H_PARTITION).try_cast("int").alias("partition"),
                    _header(H_OFFSET).try_cast("long").alias("offset"))
            .where(F.col("partition").isNotNull() & F.col("offset").isNotNull())
            .distinct())


def already_delivered_ids(repaired: DataFrame, flow: str) -> DataFrame:
    """The upstream ids a repair topic holds for this flow (write-side rows)."""
    return (_of_flow(repaired, flow).select(_header(H_ID).alias("id"))
            .where(F.col("id").isNotNull()).distinct())


def repaired_rows(repaired: DataFrame, flow: str, start: datetime, end: datetime
                  ) -> DataFrame:
    """The write-side records a repair topic holds for the flow with an event time in
    [start, end), shaped as the window reader's rows (key, value, partition, offset,
    timestamp): the partition as -1 - its own, never one of the topic's, and the timestamp
    the event time (the record is counted as the topic's own, on time)."""
    when = _header(H_TIMESTAMP).try_cast("timestamp")
    return (_of_flow(repaired, flow).where(_header(H_ID).isNotNull())
            .where((when >= F.lit(start)) & (when < F.lit(end)))
            .select("key", "value", (-1 - F.col("partition")).alias("partition"), "offset",
                    when.alias("timestamp")))


def repaired_of(spark: SparkSession, flow: Flow, tier: KafkaTier, window: Window,
                folder: RunFolder) -> tuple[str, DataFrame] | None:
    """A topic's repair topic and its write-side records of the window (`repaired_rows`),
    cached; None when the flow does not count them or there is no repair topic. Records put
    back onto the flow's own topic (`repair.to: topic`) are looked for only when the
    window's run folder holds a delivery to it: reading the topic since the window began
    costs as much as reading the window again."""
    from kafka_recon.runfiles.repair import RepairDelivery
    from kafka_recon.sources.kafka_client import endpoint
    from kafka_recon.sources.topic import topic_exists

    ep = endpoint(tier)
    target = repair_topic(flow, tier)
    if not flow.repair.counted:
        return None
    if target == tier.topic:
        delivery = folder.read_if(RepairDelivery)
        if delivery is None or all(h.target != target for h in delivery.hops):
            return None
    elif not topic_exists(ep, target):
        return None
    held = read_repair_topic(spark, ep.spark_options(), target, copies_since(flow, window))
    return target, repaired_rows(held, flow.name, window.start, window.end).cache()


def _with_headers(spark: SparkSession, options: dict[str, str]) -> Any:
    # Spark's own Kafka source: it reads headers, which the window reader does not; its
    # consumers' group ids under kafka-recon's own prefix, which its ACLs cover
    from kafka_recon.sources.topic import GROUP_PREFIX

    return (spark.read.format("kafka").options(**options)
            .option("groupIdPrefix", f"{GROUP_PREFIX}repair").option("includeHeaders", "true"))


def read_repair_topic(spark: SparkSession, options: dict[str, str], topic: str,
                      since: datetime | None = None) -> DataFrame:
    """Every committed record of a repair topic, with its headers; with `since`, only from
    the first record stamped then or later (`copies_since`)."""
    reader = _with_headers(spark, options).option("subscribe", topic)
    if since is None:
        reader = reader.option("startingOffsets", "earliest")
    else:  # a partition with nothing stamped that late has nothing to read
        reader = (reader.option("startingTimestamp", str(Window.millis(since)))
                  .option("startingOffsetsByTimestampStrategy", "latest"))
    return (reader.option("endingOffsets", "latest")
            .option("kafka.isolation.level", "read_committed").load())


def read_offsets(spark: SparkSession, options: dict[str, str], topic: str,
                 ranges: list[tuple[int, int, int]], isolation_level: str) -> DataFrame:
    """The records of a topic's offset ranges ((partition, start, end), end exclusive) as
    written: key, value, partition, offset, timestamp and headers."""
    def offsets(i: int) -> str:
        return json.dumps({topic: {str(r[0]): r[i] for r in ranges}})

    return (_with_headers(spark, options)
            .option("assign", json.dumps({topic: [r[0] for r in ranges]}))
            .option("startingOffsets", offsets(1)).option("endingOffsets", offsets(2))
            .option("kafka.isolation.level", isolation_level).load()
            .select("key", "value", "partition", "offset", "timestamp", "headers"))
