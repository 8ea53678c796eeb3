"""A sink connector's dead-letter queue, read for the window (docs/connect.md).

Kafka Connect writes a record a sink could not convert, transform or write to the queue as it
was (key, value, headers, and the original Kafka timestamp), with `__connect.errors.*` headers
naming the original topic, partition and offset, and the exception, when the connector has
`errors.deadletterqueue.context.headers.enable`. The queue is read from the offsets of the
window's start (less the disorder margin) to its end now: a record is dead-lettered whenever
the sink reached it, after the window. Its id and event time are read as the topic's records
are (the flow's record spec); records whose headers name another topic are another
connector's, and left out.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

if TYPE_CHECKING:
    from kafka_recon.config import RecordSpec
    from kafka_recon.sources.kafka_client import KafkaEndpoint

# the columns a dead-lettered record carries from its headers, and the header each is read from
HEADERS = {
    "dlq_error": "__connect.errors.exception.class.name",
    "dlq_message": "__connect.errors.exception.message",
    "dlq_stage": "__connect.errors.stage",
    "dlq_topic": "__connect.errors.topic",
    "dlq_partition": "__connect.errors.partition",
    "dlq_offset": "__connect.errors.offset",
}
# a far future, as a time to look offsets up by: no record is there, so the range runs to the
# log's end
_THE_END_MS = 32503680000000


@dataclass
class DeadLetterRead:
    """The queue's records of the window: identifiable ones, with their bucket, and the rest."""

    topic: str
    records: DataFrame        # (id, event_time, partition, offset, kafka_ts, reason, dlq_*...)


def header(name: str) -> Column:
    """A header's value as text (the first of that key; null when absent)."""
    return F.expr(f"try_element_at(filter(headers, h -> h.key = '{name}'), 1).value"
                  ).cast("string")


def with_context(raw: DataFrame) -> DataFrame:
    """The queue's Kafka rows with their context headers as columns (`HEADERS`)."""
    return raw.withColumns({col: header(h) for col, h in HEADERS.items()})


def read_queue(spark: SparkSession, ep: KafkaEndpoint, topic: str, start_ms: int
               ) -> DataFrame | None:
    """(key, value, partition, offset, timestamp, headers) of the queue from the offsets of
    `start_ms` to its end; None when the topic does not exist (no record was ever
    dead-lettered)."""
    from kafka_recon.errors import TopicError
    from kafka_recon.sources.topic import GROUP_PREFIX, window_offsets

    try:
        ranges = window_offsets(ep, topic, start_ms, _THE_END_MS)
    except TopicError as exc:
        if "UNKNOWN_TOPIC" in str(exc) or "Unknown topic" in str(exc) or "not exist" in str(exc):
            return None
        raise
    ranges = [r for r in ranges if r.end > r.start]
    if not ranges:
        return None
    starts = {topic: {str(r.partition): r.start for r in ranges}}
    ends = {topic: {str(r.partition): r.end for r in ranges}}
    # Spark's own Kafka source: it reads headers, and a queue holds few records
    return (spark.read.format("kafka").options(**ep.spark_options())
            .option("assign", json.dumps({topic: [r.partition for r in ranges]}))
            .option("startingOffsets", json.dumps(starts))
            .option("endingOffsets", json.dumps(ends))
            .option("includeHeaders", "true")
            .option("groupIdPrefix", f"{GROUP_PREFIX}dlq-{uuid.uuid4().hex[:8]}")
            .option("failOnDataLoss", "false")
            .load())


def queue_records(raw: DataFrame, record: RecordSpec, original_topic: str) -> DataFrame:
    """The queue's rows as records (the replay's shape, with the `dlq_*` columns), of the
    connector reading `original_topic` (a row whose headers name another topic is left out;
    one without headers is kept)."""
    from kafka_recon.spark.replay import extract_records

    rows = with_context(raw)
    rows = rows.where(F.col("dlq_topic").isNull() | (F.col("dlq_topic") == original_topic))
    return extract_records(rows, record)


def of_window(records: DataFrame, start: datetime, end: datetime, closes_at: datetime,
              bucket_seconds: int) -> tuple[DataFrame, DataFrame]:
    """(the window's identifiable dead-lettered records with their bucket, its unidentifiable
    ones: those whose Kafka timestamp, the original record's, lies in the window plus grace)."""
    from kafka_recon.spark.read import identifiable, window_records
    from kafka_recon.spark.replay import arrived

    unreadable = records.where(~identifiable(records) & arrived(start, closes_at))
    return window_records(records, start, end, bucket_seconds), unreadable
