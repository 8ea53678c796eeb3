"""Schemas by id from a schema registry (Confluent's REST API), on the driver, once per id.

A record in the registry's wire format names its schema by a 4-byte id; the replay finds the
distinct ids of its window and asks here for each. An id the registry does not know, or whose
schema is of another type than the flow reads, is not an error of the run: its records are
unidentifiable, each with that reason. A registry that cannot be reached is (the run is
inconclusive: nothing can be decoded).

`mock://<name>` is confluent-kafka's in-process registry: one client per URL per process, so
tests register real schemas into the very client the replay then reads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kafka_recon.errors import RegistryError

# the registry's schema types a record format can be decoded with
FORMAT_TYPES = {"avro": "AVRO", "json_schema": "JSON"}
_CLIENTS: dict[str, Any] = {}


@dataclass(frozen=True)
class RegistrySchema:
    """A schema id's answer: its text (decodable), or why its records cannot be read."""

    text: str | None = None
    problem: str | None = None


def client(conf: dict[str, str]) -> Any:
    """One client per registry and credentials: schemas are cached by the client."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    key = json.dumps(conf, sort_keys=True)
    if key not in _CLIENTS:
        try:
            _CLIENTS[key] = SchemaRegistryClient.new_client(dict(conf))
        except (ValueError, TypeError) as exc:
            raise RegistryError(f"schema registry {conf.get('url')}: {exc}") from None
    return _CLIENTS[key]


def schemas(conf: dict[str, str], ids: list[int], record_format: str
            ) -> dict[int, RegistrySchema]:
    """Each schema id's schema for `record_format`, or the problem its records have."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    reg = client(conf)
    want = FORMAT_TYPES[record_format]
    out: dict[int, RegistrySchema] = {}
    for sid in sorted(ids):
        try:
            schema = reg.get_schema(sid)
        except SchemaRegistryError as exc:
            if exc.http_status_code == 404:
                out[sid] = RegistrySchema(problem=f"schema id {sid} is unknown to the registry")
                continue
            raise RegistryError(f"schema registry {conf['url']}: schema id {sid}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - transport errors of httpx, TLS, auth
            raise RegistryError(f"schema registry {conf['url']} cannot be read: "
                              f"{type(exc).__name__}: {exc}") from None
        kind = (schema.schema_type or "AVRO").upper()
        if kind != want:
            why = (" (Protobuf cannot be read: spark-protobuf is not on the Maven Central "
                   "kafka-recon installs from)" if kind == "PROTOBUF" else "")
            out[sid] = RegistrySchema(problem=f"schema id {sid} is a {kind} schema, the flow "
                                              f"reads {record_format}{why}")
        elif schema.references:
            out[sid] = RegistrySchema(problem=f"schema id {sid} references other schemas, "
                                              "which kafka-recon does not resolve")
        else:
            out[sid] = RegistrySchema(text=schema.schema_str)
    return out


def latest(conf: dict[str, str], subject: str, record_format: str) -> tuple[int, str]:
    """The id and text of a subject's latest schema, which a write-side repair writes with;
    RegistryError when there is none of the flow's format, or it cannot be read."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    where = f"schema registry {conf.get('url')}: subject {subject}"
    try:
        found = client(conf).get_latest_version(subject)
    except SchemaRegistryError as exc:
        if exc.http_status_code == 404:
            raise RegistryError(f"{where} has no schema: register the topic's value schema "
                                "first") from None
        raise RegistryError(f"{where}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - transport errors of httpx, TLS, auth
        raise RegistryError(f"{where} cannot be read: {type(exc).__name__}: {exc}") from None
    schema = found.schema
    kind = (schema.schema_type or "AVRO").upper()
    if kind != FORMAT_TYPES[record_format]:
        raise RegistryError(f"{where}: the latest schema (id {found.schema_id}) is a {kind} "
                            f"schema, the flow writes {record_format}")
    if schema.references:
        raise RegistryError(f"{where}: the latest schema (id {found.schema_id}) references "
                            "other schemas, which kafka-recon does not resolve")
    return int(found.schema_id), str(schema.schema_str)
