"""Avro and JSON Schema values in the schema registry's wire format, and plain Avro.

No schema registry server installs on these machines (Confluent's is not on the reachable
registries, Karapace does not build, Apicurio ships as containers): the registry here is
confluent-kafka's in-process `mock://` registry, holding real schemas, and every value is
written by confluent-kafka's own serializers (or fastavro), byte for byte what producers write.
kafka-recon's replay fetches the schemas through the same registry client API it uses against
a real registry, and Spark decodes with spark-avro.
"""

from __future__ import annotations

import io
import json
import struct
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from harness.services.kafka import KafkaCluster
from kafka_recon.config import RecordSpec
from kafka_recon.sources import registry
from kafka_recon.sources.registry import RegistrySchema
from tests.integration.engine_harness import Scenario, at, findings

pytestmark = pytest.mark.integration

V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "note", "type": ["null", "string"],
                                       "default": None}]}
OTHER = {"type": "record", "name": "Click", "fields": [{"name": "url", "type": "string"}]}
PROTO = 'syntax = "proto3";\nmessage Order { int64 id = 1; }\n'


def serializer(client: Any, schema: dict[str, Any]) -> Any:
    from confluent_kafka.schema_registry.avro import AvroSerializer

    return AvroSerializer(client, json.dumps(schema), conf={"auto.register.schemas": True})


def framed(schema_id: int, payload: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + payload


def avro_bytes(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    import fastavro

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), record)
    return buf.getvalue()


def test_an_avro_topic_with_two_schema_versions_reconciles_exactly_and_names_what_it_cannot_read(
        tmp_path: Path, kafka: KafkaCluster, spark: Any) -> None:
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.serialization import MessageField, SerializationContext

    scn = Scenario(tmp_path, kafka.bootstrap, partitions=1)
    client = scn.avro_through_registry("recon")
    rows = {i: at(i * 20) for i in range(1, 41)}
    scn.upstream(rows)
    scn.sink([(i, t) for i, t in rows.items() if i not in (3, 33)])
    ctx = SerializationContext(scn.topic, MessageField.VALUE)
    v1, v2 = serializer(client, V1), serializer(client, V2)
    good = [(str(i).encode(), (v1 if i <= 20 else v2)({"id": i, "ts": t} if i <= 20 else
                                                      {"id": i, "ts": t, "note": "x"}, ctx), t)
            for i, t in rows.items()]
    v1_id = struct.unpack(">I", good[0][1][1:5])[0]
    assert struct.unpack(">I", good[-1][1][1:5])[0] != v1_id, "two schema versions"
    other_id = client.register_schema(f"{scn.topic}-other", Schema(json.dumps(OTHER), "AVRO"))
    proto_id = client.register_schema(f"{scn.topic}-proto", Schema(PROTO, "PROTOBUF"))
    t = at(500)
    bad = [
        (b"json", b'{"id": 99, "ts": "2026-11-20T08:00:00Z"}', t),          # not framed
        (b"unknown", framed(999_999, avro_bytes(V1, {"id": 98, "ts": t})), t),
        # bytes of another schema under v1's id: PERMISSIVE from_avro would read an id from them
        (b"misframed", framed(v1_id, avro_bytes(OTHER, {"url": "https://example.com/a"})), t),
        (b"truncated", framed(v1_id, avro_bytes(V1, {"id": 97, "ts": t})[:-2]), t),
        (b"other", framed(other_id, avro_bytes(OTHER, {"url": "u"})), t),
        (b"proto", framed(proto_id, b"\x00\x08\x60"), t),
    ]
    scn.produce_raw([*good, *bad])

    result = scn.reconcile(spark)
    assert findings(result) == [("loss", "consume", "topic->sink", 2),
                                ("unidentifiable", "write", "topic", 6)]
    loss = next(f for f in result["findings"] if f["kind"] == "loss")
    assert scn.ids(loss["ids"]) == {3, 33}
    topic = next(t for t in result["tiers"] if t["name"] == "topic")
    assert topic["count"] == 40
    unid = next(f for f in result["findings"] if f["kind"] == "unidentifiable")
    reasons = dict(zip(scn.texts(unid["ids"], "offset"), scn.texts(unid["ids"], "reason"),
                       strict=True))
    assert [reasons[str(o)] for o in range(40, 46)] == [
        "not in the schema registry's wire format (first byte 0x7B, expected 0x00 and a "
        "4-byte schema id)",
        "schema id 999999 is unknown to the registry",
        f"the bytes do not decode as Avro of their schema (schema id {v1_id})",
        f"the bytes do not decode as Avro of their schema (schema id {v1_id})",
        f"the schema (schema id {other_id}) has no field $.id",
        f"schema id {proto_id} is a PROTOBUF schema, the flow reads avro (Protobuf cannot be "
        "read: spark-protobuf is not on the Maven Central kafka-recon installs from)",
    ]


def kafka_rows(spark: Any, values: list[bytes]) -> Any:
    from tests.unit.spark.frames import KAFKA_ROWS

    return spark.createDataFrame([(b"k", v, 0, n, at(n)) for n, v in enumerate(values)],
                                 KAFKA_ROWS)


def test_plain_avro_with_a_schema_file_reads_times_and_refuses_garbage(spark: Any) -> None:
    from kafka_recon.spark.replay import extract_records

    schema = {"type": "record", "name": "E", "fields": [
        {"name": "meta", "type": ["null", {"type": "record", "name": "M", "fields": [
            {"name": "key", "type": "string"}]}]},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "sent", "type": "long"}]}
    when = datetime(2026, 11, 20, 5, 30)
    values = [avro_bytes(schema, {"meta": {"key": "A-1"}, "at": when, "sent": 1795000000000}),
              avro_bytes(schema, {"meta": None, "at": when, "sent": 1}),
              b"\x02\x04ab\x00\x00\x00\x00"]
    spec = RecordSpec(id="$.meta.key", event_time="$.at", format="avro",
                      schema_file="/unused.avsc")
    got = extract_records(kafka_rows(spark, values), spec,
                          {0: RegistrySchema(text=json.dumps(schema))}).collect()
    assert [(r["id"], r["event_time"]) for r in got[:2]] == [("A-1", when), (None, when)]
    assert got[1]["reason"] == "no readable id at $.meta.key"
    assert got[2]["id"] is None and got[2]["reason"] == "the bytes do not decode as Avro of " \
                                                       "their schema"
    # a long that is not a logical time is read in the flow's event_time_format
    spec = RecordSpec(id="$.meta.key", event_time="$.sent", event_time_format="epoch_ms",
                      format="avro", schema_file="/unused.avsc")
    first = extract_records(kafka_rows(spark, values[:1]), spec,
                            {0: RegistrySchema(text=json.dumps(schema))}).first()
    assert first is not None and first["event_time"] == datetime(2026, 11, 18, 11, 6, 40)


def test_json_schema_values_are_read_after_their_frame(spark: Any) -> None:
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from kafka_recon.spark.replay import extract_records

    conf = {"url": f"mock://js-{uuid.uuid4().hex[:8]}"}
    schema = {"type": "object", "properties": {
        "order": {"type": "object", "properties": {"id": {"type": "integer"}}},
        "ts": {"type": "string"}}}
    doc = {"order": {"id": 12345678901234567}, "ts": "2026-11-20T05:00:00Z"}
    # the bytes confluent-kafka's JSON Schema serializer writes: frame, then JSON text
    written = JSONSerializer(json.dumps(schema), registry.client(conf),
                             conf={"auto.register.schemas": True})(
        doc, SerializationContext("orders", MessageField.VALUE))
    sid = struct.unpack(">I", written[1:5])[0]
    avro_id = registry.client(conf).register_schema("other", Schema(json.dumps(V1), "AVRO"))
    values = [written, json.dumps(doc).encode(), framed(avro_id, json.dumps(doc).encode())]
    spec = RecordSpec(id="$.order.id", event_time="$.ts", format="json_schema")
    schemas = registry.schemas(conf, [sid, avro_id], "json_schema")
    got = extract_records(kafka_rows(spark, values), spec, schemas).collect()
    assert got[0]["id"] == "12345678901234567" and got[0]["reason"] is None
    assert got[1]["id"] is None and got[1]["reason"].startswith("not in the schema registry")
    assert got[2]["reason"] == f"schema id {avro_id} is a AVRO schema, the flow reads json_schema"


def test_a_processors_drops_read_fields_of_avro_records(spark: Any) -> None:
    from kafka_recon.config import Drops
    from kafka_recon.spark.replay import extract_records

    schema = {"type": "record", "name": "O", "fields": [
        {"name": "id", "type": "long"}, {"name": "ts", "type": "string"},
        {"name": "meta", "type": ["null", {"type": "record", "name": "M", "fields": [
            {"name": "channel", "type": "string"}]}]}]}
    t = "2026-11-20T05:00:00Z"
    values = [avro_bytes(schema, {"id": 1, "ts": t, "meta": {"channel": "test"}}),
              avro_bytes(schema, {"id": 2, "ts": t, "meta": {"channel": "web"}}),
              avro_bytes(schema, {"id": 3, "ts": t, "meta": None}),
              b"\x02\x04ab\x00\x00\x00\x00"]
    spec = RecordSpec(id="$.id", event_time="$.ts", format="avro", schema_file="/unused.avsc")
    drops = Drops(where="channel = 'test' OR missing IS NOT NULL",
                  fields={"channel": "$.meta.channel", "missing": "$.not_in_schema"})
    got = extract_records(kafka_rows(spark, values), spec,
                          {0: RegistrySchema(text=json.dumps(schema))}, drops).collect()
    # a field the schema lacks is null, an undecodable value is judged on nothing: both kept
    assert [(r["id"], r["dropped"]) for r in got] == [("1", True), ("2", False), ("3", False),
                                                       (None, False)]
