"""Record formats in the flow config, Avro field paths, and schemas by id from a registry
(confluent-kafka's in-process `mock://` registry: no registry server installs here)."""

from __future__ import annotations

import json
import uuid

import pytest

from kafka_recon.config import RecordSpec
from kafka_recon.errors import ConfigError
from kafka_recon.sources import registry
from kafka_recon.sources.kafka_client import KafkaEndpoint
from kafka_recon.spark.formats import avro_field, is_time_type, required_fields

pytestmark = pytest.mark.unit

SCHEMA = json.dumps({"type": "record", "name": "O", "fields": [
    {"name": "id", "type": "long"},
    {"name": "meta", "type": ["null", {"type": "record", "name": "M", "fields": [
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}]},
    {"name": "note", "type": ["null", "string"]}]})


def test_avro_paths_walk_records_and_unions_with_null() -> None:
    assert avro_field(SCHEMA, "$.id") == (["id"], "long")
    names, kind = avro_field(SCHEMA, "$.meta.at")  # type: ignore[misc]
    assert names == ["meta", "at"] and is_time_type(kind)
    assert avro_field(SCHEMA, "$.nope") is None
    assert avro_field(SCHEMA, "$.id.deeper") is None
    assert required_fields(SCHEMA) == ["id"]


@pytest.mark.parametrize(("fields", "message"), [
    ({"format": "protobuf"}, "spark-protobuf is not on the Maven Central"),
    ({"format": "xml"}, "expected one of json, avro, json_schema"),
    ({"schema_file": "o.avsc"}, "set format: avro"),
    ({"format": "avro", "id": "value"}, "names its id by a path"),
    ({"format": "avro", "envelope": "debezium", "event_time": "source_ts"},
     "debezium envelope is read from JSON"),
])
def test_record_formats_that_cannot_be_read_are_config_errors(
        fields: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RecordSpec(**{"id": "$.id", "event_time": "$.ts", **fields})  # type: ignore[arg-type]


def test_schemas_by_id_say_why_an_id_cannot_be_read() -> None:
    from confluent_kafka.schema_registry import Schema

    conf = {"url": f"mock://unit-{uuid.uuid4().hex[:8]}"}
    client = registry.client(conf)
    assert registry.client(dict(conf)) is client  # one client (and cache) per registry
    avro = client.register_schema("o-value", Schema(SCHEMA, "AVRO"))
    js = client.register_schema("j-value", Schema('{"type": "object"}', "JSON"))
    proto = client.register_schema("p-value", Schema('syntax = "proto3";', "PROTOBUF"))
    got = registry.schemas(conf, [avro, js, proto, 4242], "avro")
    assert got[avro].text == SCHEMA and got[avro].problem is None
    assert got[js].problem == f"schema id {js} is a JSON schema, the flow reads avro"
    assert "Protobuf cannot be read" in (got[proto].problem or "")
    assert got[4242].problem == "schema id 4242 is unknown to the registry"
    assert registry.schemas(conf, [js], "json_schema")[js].text == '{"type": "object"}'


def test_the_registry_comes_from_the_tier_or_else_the_connection() -> None:
    ep = KafkaEndpoint("b:1", registry=(("basic.auth.user.info", "u:p"),
                                        ("url", "https://sr:8081")))
    assert ep.registry_conf(None) == {"url": "https://sr:8081", "basic.auth.user.info": "u:p"}
    assert ep.registry_conf("mock://t")["url"] == "mock://t"
    with pytest.raises(ConfigError, match="needs a schema registry"):
        KafkaEndpoint("b:1").registry_conf(None)
