"""A write-side repair's JSON records (kafka_recon.spark.repair) are read back by the flow's own
reader as the upstream row's id and event time, whatever the record spec says of where they
are and how the time is written; on a local Spark."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

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
    assert {h["key"]: bytes(h["value"]) for h in out[0]["headers"]}["kafka-recon-id"] == b"7"
    # a spec reading its time from the value: the Kafka timestamp is the producer's
    spec = RecordSpec(id="$.id", event_time="$.ts")
    assert {r["ts_ms"] for r in upstream_copies(json_records(_upstream(spark), spec, {}),
                                                spec).collect()} == {None}


def test_a_topics_copy_keeps_its_partition_where_the_repair_topic_has_it_and_its_headers(
        spark: SparkSession) -> None:
    planned = spark.createDataFrame(
        [("1", 0, 10, T, b"k1", b"v1", None),  # written without headers
         ("2", 5, 11, T, b"k2", b"v2", [("trace", b"t-2"), ("empty", None),
                                        ("kafka-recon-plan", b"an older copy's")])],
        "id string, partition int, offset long, timestamp timestamp, key binary, "
        "value binary, headers array<struct<key:string,value:binary>>")
    out = {bytes(r["key"]): r for r in topic_copies(planned, 3).collect()}
    assert out[b"k1"]["target"] == 0 and out[b"k2"]["target"] is None
    assert [h["key"] for h in out[b"k1"]["headers"]] == [
        "kafka-recon-partition", "kafka-recon-offset", "kafka-recon-timestamp"]
    headers = [(h["key"], None if h["value"] is None else bytes(h["value"]))
               for h in out[b"k2"]["headers"]]
    # the record's own headers first, as written (a null value too); kafka-recon's own name
    # where the copy came from, and never twice
    assert headers == [("trace", b"t-2"), ("empty", None), ("kafka-recon-partition", b"5"),
                       ("kafka-recon-offset", b"11"),
                       ("kafka-recon-timestamp", b"2026-11-20T08:30:15.123Z")]
    # a plan made before headers were kept: its copies carry kafka-recon's only
    old = topic_copies(planned.drop("headers"), 3).where(F.col("key") == b"k2").collect()[0]
    assert [h["key"] for h in old["headers"]] == ["kafka-recon-partition", "kafka-recon-offset",
                                                  "kafka-recon-timestamp"]


AVRO = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "amount", "type": ["null", "string"], "default": None},
    {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
        {"name": "name", "type": ["null", "string"]},
        {"name": "tier", "type": "string", "default": "basic"}]}},
    {"name": "source", "type": "string", "default": "upstream"}]}


def _published(spark: SparkSession, spec: RecordSpec, schema: dict, sid: int | None
               ) -> DataFrame:
    from kafka_recon.spark.encode import encoded

    rows = _upstream(spark)
    records = json_records(rows, spec, {"$.amount": "amount", "$.customer.name": "customer"})
    return encoded(records, spec.format, json.dumps(schema), sid, spec.event_time)


@pytest.mark.parametrize("framed", [True, False], ids=["registry", "schema-file"])
def test_a_published_avro_record_reads_back_as_the_upstream_rows_id_and_event_time(
        spark: SparkSession, tmp_path: Path, framed: bool) -> None:
    from kafka_recon.sources.registry import RegistrySchema

    schema_file = None
    if not framed:
        schema_file = tmp_path / "order.avsc"
        schema_file.write_text(json.dumps(AVRO))
    spec = RecordSpec(id="$.id", event_time="$.created", format="avro",
                      schema_file=str(schema_file) if schema_file else None)
    published = _published(spark, spec, AVRO, 42 if framed else None)
    schemas = {42 if framed else 0: RegistrySchema(text=json.dumps(AVRO))}
    raw = published.select("key", "value", F.lit(0).alias("partition"),
                           F.lit(0).cast("long").alias("offset"),
                           F.lit(T).cast("timestamp").alias("timestamp"))
    got = extract_records(raw, spec, schemas).orderBy("id").collect()
    # the flow's own reader: the exact bytes decode and encode back, the 64-bit id exact
    assert [(r["id"], r["event_time"], r["reason"]) for r in got] == [
        ("7", T, None), (BIG, T, None)]
    value = bytes(published.where(F.col("id") == "7").collect()[0]["value"])
    if framed:  # the registry's wire format: magic byte 0, schema id 42
        assert value[:5] == b"\x00\x00\x00\x00\x2a"
    import io

    from fastavro import parse_schema, schemaless_reader
    body = io.BytesIO(value[5:] if framed else value)
    doc = schemaless_reader(body, parse_schema(AVRO), None)
    # defaults where nothing fills a field, the row's columns where repair.fields put them
    assert (doc["amount"], doc["customer"], doc["source"]) == (
        "3.00", {"name": None, "tier": "basic"}, "upstream")


def test_a_published_json_schema_record_is_its_json_text_after_the_frame(
        spark: SparkSession) -> None:
    from kafka_recon.sources.registry import RegistrySchema

    spec = RecordSpec(id="$.id", event_time="$.created", format="json_schema")
    schema = {"type": "object", "properties": {"id": {"type": "string"}}}
    published = _published(spark, spec, schema, 9)
    raw = published.select("key", "value", F.lit(0).alias("partition"),
                           F.lit(0).cast("long").alias("offset"),
                           F.lit(T).cast("timestamp").alias("timestamp"))
    got = extract_records(raw, spec, {9: RegistrySchema(text=json.dumps(schema))})
    assert sorted((r["id"], r["event_time"]) for r in got.collect()) == [
        ("7", T), (BIG, T)]


def test_a_schema_the_rows_cannot_fill_is_named_field_by_field() -> None:
    from kafka_recon.spark.encode import unfilled

    text = json.dumps(AVRO)
    assert unfilled(text, "avro", ["$.id", "$.created", "$.customer.name"]) == []
    # customer is required (its tier has a default, its name may be null: one path does it)
    assert unfilled(text, "avro", ["$.id"]) == ["$.created (required)",
                                                "$.customer (required)"]
    assert unfilled(text, "avro", ["$.id", "$.created", "$.customer.name", "$.cost",
                                   "$.customer.age"]) == ["$.cost (not in the schema)",
                                                          "$.customer.age (not in the schema)"]
    js = json.dumps({"type": "object", "required": ["id", "meta"], "properties": {
        "meta": {"type": "object", "required": ["origin"]}}})
    assert unfilled(js, "json_schema", ["$.id", "$.meta.x"]) == ["$.meta.origin (required)"]


def test_an_avro_datum_takes_the_upstreams_text_as_the_schemas_types() -> None:
    from decimal import Decimal

    from kafka_recon.spark.encode import avro_datum

    assert avro_datum(BIG, "long", {}) == int(BIG)
    assert avro_datum(12, ["null", "string"], {}) == "12"
    assert avro_datum("true", "boolean", {}) is True
    assert avro_datum("12.50", {"type": "bytes", "logicalType": "decimal", "precision": 9,
                                "scale": 2}, {}) == Decimal("12.50")
    with pytest.raises(ValueError, match="fits no branch"):
        avro_datum("abc", ["null", "long"], {})
    with pytest.raises(ValueError, match="no value for the required field id"):
        avro_datum({}, AVRO, {})
