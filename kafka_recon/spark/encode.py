"""A write-side repair's values in the topic's own format (`repair.write_side: publish`).

`repair.json_records` places the upstream row's id, event time and `repair.fields` into one
JSON document where the flow's record spec reads them. For a topic of plain JSON that document
is the value. For the registry's formats it is written with the topic's latest schema (the
subject `<topic>-value`) in the registry's wire format: a magic byte 0, the 4-byte schema id,
then the Avro binary of the document (avro) or its JSON text (json_schema); for Avro written
without a registry (`record.schema_file`), the bare Avro binary of that schema.

Before a record is written, `unfilled` names every field the schema requires that nothing
fills, so a schema the rows cannot satisfy is refused with one line, never half-published.
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType

from kafka_recon.spark.formats import TIME_TYPES, avro_field, is_time_type, nullable

PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def frame(schema_id: int) -> bytes:
    """The registry's wire-format prefix of a schema id."""
    return b"\x00" + schema_id.to_bytes(4, "big")


# ------------------------------------------------------------------ what a schema requires
def _named(node: Any, out: dict[str, Any], namespace: str = "") -> dict[str, Any]:
    """Every named type (record, enum, fixed) of an Avro schema, by name and full name."""
    if isinstance(node, list):
        for branch in node:
            _named(branch, out, namespace)
    elif isinstance(node, dict):
        kind = node.get("type")
        if kind in ("record", "enum", "fixed") and "name" in node:
            ns = node.get("namespace", namespace)
            name = node["name"]
            out[name.rsplit(".", 1)[-1]] = node
            out[name if "." in name or not ns else f"{ns}.{name}"] = node
            for field in node.get("fields", []):
                _named(field["type"], out, ns)
        elif kind == "array":
            _named(node.get("items"), out, namespace)
        elif kind == "map":
            _named(node.get("values"), out, namespace)
        elif isinstance(kind, (dict, list)):
            _named(kind, out, namespace)
    return out


def _resolve(node: Any, named: dict[str, Any]) -> Any:
    if isinstance(node, str) and node not in PRIMITIVES:
        return named.get(node, node)
    if isinstance(node, dict) and isinstance(node.get("type"), (dict, list)):
        return node["type"]
    return node


def _record_of(node: Any, named: dict[str, Any]) -> dict[str, Any] | None:
    node = _resolve(node, named)
    if isinstance(node, list):
        records = [r for r in (_resolve(b, named) for b in node)
                   if isinstance(r, dict) and r.get("type") == "record"]
        return records[0] if len(records) == 1 else None
    return node if isinstance(node, dict) and node.get("type") == "record" else None


def unfilled(schema_text: str, record_format: str, paths: list[str]) -> list[str]:
    """The JSON paths of the fields the schema requires (no default, never null) that no path
    of `paths` fills, and `paths` the schema has no field for, each said."""
    schema = json.loads(schema_text)
    out: list[str] = []
    if record_format == "avro":
        named = _named(schema, {})

        def walk(record: dict[str, Any] | None, prefix: str) -> None:
            for field in (record or {}).get("fields", []):
                path = f"{prefix}.{field['name']}"
                filled = any(p == path or p.startswith(path + ".") for p in paths)
                if filled:
                    walk(_record_of(field["type"], named), path)
                elif "default" not in field and not nullable(field["type"]):
                    out.append(f"{path} (required)")

        root = _record_of(schema, named)
        walk(root, "$")
        for p in paths:
            node: Any = root
            for name in p[2:].split("."):
                field = next((f for f in (node or {}).get("fields", [])
                              if f["name"] == name), None)
                node = None if field is None else _record_of(field["type"], named) or {}
                if field is None:
                    out.append(f"{p} (not in the schema)")
                    break
        return out

    def walk_json(node: dict[str, Any], prefix: str) -> None:
        props = node.get("properties", {})
        for name in node.get("required", []):
            path = f"{prefix}.{name}"
            if not any(p == path or p.startswith(path + ".") for p in paths):
                out.append(f"{path} (required)")
        for name, sub in props.items():
            path = f"{prefix}.{name}"
            if isinstance(sub, dict) and any(p.startswith(path + ".") for p in paths):
                walk_json(sub, path)

    walk_json(schema, "$")
    return out


# ------------------------------------------------------------------ one value
def avro_datum(value: Any, node: Any, named: dict[str, Any]) -> Any:
    """A JSON document's value shaped as the Avro type `node` takes it (text ids to longs,
    numbers to text, ISO times to datetimes); ValueError when it cannot be."""
    node = _resolve(node, named)
    if isinstance(node, list):  # a union: null, else the first branch that takes the value
        if value is None and "null" in node:
            return None
        for branch in (b for b in node if b != "null"):
            try:
                return avro_datum(value, branch, named)
            except (ValueError, TypeError, ArithmeticError):
                continue
        raise ValueError(f"{value!r} fits no branch of {node}")
    if isinstance(node, dict):
        kind, logical = node.get("type"), node.get("logicalType")
        if kind == "record":
            doc = value if isinstance(value, dict) else {}
            out = {}
            for field in node["fields"]:
                name = field["name"]
                if name in doc:
                    out[name] = avro_datum(doc[name], field["type"], named)
                elif "default" in field:
                    out[name] = field["default"]
                elif nullable(field["type"]):
                    out[name] = None
                else:
                    raise ValueError(f"no value for the required field {name}")
            return out
        if logical in TIME_TYPES:
            when = _time(value)
            if logical == "date":
                return when.date()
            return when.replace(tzinfo=None) if logical.startswith("local") else when
        if logical == "decimal":
            return Decimal(str(value))
        if kind == "enum":
            return str(value)
        if kind == "array":
            return [avro_datum(v, node["items"], named) for v in value]
        if kind == "map":
            return {str(k): avro_datum(v, node["values"], named) for k, v in value.items()}
        if kind == "fixed":
            return value.encode() if isinstance(value, str) else bytes(value)
        return avro_datum(value, kind, named)
    if node == "null":
        if value is not None:
            raise ValueError(f"{value!r} is not null")
        return None
    if value is None:
        raise ValueError(f"null for a {node}")
    if node in ("int", "long"):
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(f"{value!r} is not whole")
        return int(value)
    if node in ("float", "double"):
        return float(value)
    if node == "boolean":
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("true", "false"):
            return str(value).lower() == "true"
        raise ValueError(f"{value!r} is not a boolean")
    if node == "string":
        return value if isinstance(value, str) else json.dumps(value)
    if node == "bytes":
        return value.encode() if isinstance(value, str) else bytes(value)
    raise ValueError(f"unknown Avro type {node!r}")


def _time(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, int):  # the event time's epoch microseconds (`_encoder`)
        return _EPOCH + timedelta(microseconds=value)
    parsed = datetime.fromisoformat(str(value).replace(" ", "T"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _set(doc: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path[2:].split(".")
    for name in parents:
        doc = doc.setdefault(name, {})
    doc[leaf] = value


def _encoder(schema_text: str, time_path: str | None) -> Any:
    """A function of (JSON text, event time in epoch µs) to the Avro binary of the document
    (the time where the schema types it as a time); the schema parsed once per worker."""
    parsed: list[Any] = []

    def encode(text: str | None, micros: int | None) -> bytes | None:
        from fastavro import parse_schema, schemaless_writer

        if text is None:
            return None
        if not parsed:
            schema = json.loads(schema_text)
            parsed.extend([parse_schema(schema), schema, _named(schema, {})])
        fast, schema, named = parsed
        doc = json.loads(text)
        if time_path is not None and micros is not None:
            _set(doc, time_path, micros)
        out = io.BytesIO()
        schemaless_writer(out, fast, avro_datum(doc, schema, named))
        return out.getvalue()

    return encode


def encoded(records: DataFrame, record_format: str, schema_text: str | None,
            schema_id: int | None, time_path: str | None) -> DataFrame:
    """`repair.json_records`' rows with their value in the topic's format: unchanged for
    json; framed with `schema_id` for the registry's formats (none: Avro of a schema file).
    `time_path` is where the event time goes when the Avro schema types it as a time."""
    if record_format == "json":
        return records
    body = F.col("value")
    if record_format == "avro":
        assert schema_text is not None
        typed = time_path is not None and _time_typed(schema_text, time_path)
        encode = F.udf(_encoder(schema_text, time_path if typed else None), BinaryType())
        body = encode(F.col("value").cast("string"), F.unix_micros("event_time"))
    value: Column = body if schema_id is None else F.concat(F.lit(frame(schema_id)), body)
    return records.withColumn("value", value)


def _time_typed(schema_text: str, path: str) -> bool:
    found = avro_field(schema_text, path)
    return found is not None and is_time_type(found[1])
