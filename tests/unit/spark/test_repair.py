"""A write-side repair's JSON records (kafka_recon.spark.repair) are read back by the flow's own
reader as the upstream row's id and event time, whatever the record spec says of where they
are and how the time is written; on a local Spark."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

pytestmark = pytest.mark.unit

pyspark = pytest.importorskip("pyspark")
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from kafka_recon.config import RecordSpec  # noqa: E402
from kafka_recon.spark.repair import json_records, topic_copies, upstream_copies  # noqa: E402
from kafka_recon.spark.replay import extract_records  # noqa: E402

T = datetime(2026, 11, 20, 8, 30, 15, 123000)  # naive: Spark gives UTC back naive
BIG = "9223372036854775807"  # a 64-bit id, exact


def _upstream(spark: SparkSession) -> DataFrame:
    # as read_rows gives them: the id as exact text beside every column of the id query
    return spark.createDataFrame(
        [(BIG, int(BIG), "2026-11-20 08:30:15.123", "12.50", "c-1"),
         ("7", 7, "2026-11-20T08:30:15.123Z", "3.00", None)],
        "kafka_recon_id string, id long, event_time string, amount string, customer string")


def _read_back(spark: SparkSession, records: DataFrame, spec: RecordSpec) -> list[tuple]:
    raw = records.select("key", "value", F.lit(0).alias("partition"),
                         F.lit(0).cast("long").alias("offset"),
                         F.lit(T).cast("timestamp").alias("timestamp"))
    got = extract_records(raw, spec).orderBy("id").collect()
    return [(r["id"], r["event_time"], r["reason"]) for r in got]


@pytest.mark.parametrize("fmt", ["iso8601", "epoch_s", "epoch_ms", "epoch_us", "epoch_ns",
                                 "yyyy-MM-dd HH:mm:ss.SSS"])
def test_a_json_repair_record_reads_back_as_the_upstream_rows_id_and_event_time(
        spark: SparkSession, fmt: str) -> None:
    spec = RecordSpec(id="$.order.id", event_time="$.created", event_time_format=fmt)
    records = json_records(_upstream(spark), spec, {"$.amount": "amount",
                                                    "$.order.customer": "customer"})
    assert _read_back(spark, records, spec) == [("7", T, None), (BIG, T, None)]
    value = json.loads(records.where(F.col("id") == BIG).collect()[0]["value"])
    assert value["amount"] == "12.50" and value["order"]["customer"] == "c-1"
    if fmt == "iso8601":  # the upstream's own text, as its producer published it
        assert value["created"] == "2026-11-20 08:30:15.123"


def test_a_time_the_upstream_types_as_a_timestamp_is_written_in_iso_8601(
        spark: SparkSession) -> None:
    spec = RecordSpec(id="$.id", event_time="$.ts")
    rows = _upstream(spark).withColumn("event_time", F.col("event_time").cast("timestamp"))
    records = json_records(rows, spec, {})
    assert {json.loads(r["value"])["ts"] for r in records.collect()} == {
        "2026-11-20T08:30:15.123000Z"}
    assert _read_back(spark, records, spec) == [("7", T, None), (BIG, T, None)]


def test_an_id_in_the_key_and_a_time_in_the_kafka_timestamp_go_where_the_spec_reads_them(
        spark: SparkSession) -> None:
    spec = RecordSpec(id="key", event_time="kafka_timestamp")
    records = json_records(_upstream(spark), spec, {})
    out = upstream_copies(records, spec).orderBy("key").collect()
    assert [bytes(r["key"]).decode() for r in out] == ["7", BIG]
    millis = int((T - datetime(1970, 1, 1)).total_seconds() * 1000)
    assert {r["ts_ms"] for r in out} == {millis}
    assert {h["k"]: h["v"] for h in out[0]["headers"]}["kafka-recon-id"] == "7"
    # a spec reading its time from the value: the Kafka timestamp is the producer's
    spec = RecordSpec(id="$.id", event_time="$.ts")
    assert {r["ts_ms"] for r in upstream_copies(json_records(_upstream(spark), spec, {}),
                                                spec).collect()} == {None}


def test_a_topics_copy_keeps_its_partition_where_the_repair_topic_has_it(
        spark: SparkSession) -> None:
    planned = spark.createDataFrame(
        [("1", 0, 10, T, b"k1", b"v1"), ("2", 5, 11, T, b"k2", b"v2")],
        "id string, partition int, offset long, timestamp timestamp, key binary, "
        "value binary")
    out = {bytes(r["key"]): r for r in topic_copies(planned, 3).collect()}
    assert out[b"k1"]["target"] == 0 and out[b"k2"]["target"] is None
    headers = {h["k"]: h["v"] for h in out[b"k2"]["headers"]}
    assert headers == {"kafka-recon-partition": "5", "kafka-recon-offset": "11",
                       "kafka-recon-timestamp": "2026-11-20T08:30:15.123Z"}
