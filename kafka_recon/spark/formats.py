"""Registry-framed and Avro values, read as Spark columns: never decoded to garbage.

The schema registry's wire format is a magic byte 0, a 4-byte big-endian schema id, then the
payload (Avro binary, or JSON text for JSON Schema). A value is decoded only when it is framed
so and its schema id's schema is known; otherwise its record is unidentifiable with the reason.

Spark's `from_avro` in PERMISSIVE mode decodes bytes that are not Avro of that schema into
zeros and empty strings rather than failing; so a decoded value counts only when it encodes
back (`to_avro`) to exactly the bytes read. Avro's binary encoding is canonical for what
Java's and fastavro's writers produce, so a well-written record always passes; bytes of
another schema, truncated or trailing bytes, and misframed values do not. (A writer that
splits arrays or maps into several blocks would fail the check: its records are reported
unidentifiable, never misread.)
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro, to_avro

if TYPE_CHECKING:
    from kafka_recon.sources.registry import RegistrySchema

# Avro logical types Spark decodes to a timestamp, a timestamp without zone, or a date
TIME_TYPES = ("timestamp-millis", "timestamp-micros", "local-timestamp-millis",
              "local-timestamp-micros", "date")


def framing(value: Column) -> tuple[Column, Column, Column]:
    """(framed, schema id, payload) of a registry wire-format value."""
    framed = (F.length(value) >= 5) & (F.hex(F.substring(value, 1, 1)) == "00")
    sid = F.conv(F.hex(F.substring(value, 2, 4)), 16, 10).cast("long")
    payload = F.expr("substring(value, 6)")
    return framed, sid, payload


def unframed_reason(value: Column) -> Column:
    return F.when(value.isNull(), F.lit("no value")).otherwise(F.concat(
        F.lit("not in the schema registry's wire format (first byte 0x"),
        F.coalesce(F.hex(F.substring(value, 1, 1)), F.lit("")),
        F.lit(", expected 0x00 and a 4-byte schema id)")))


def avro_field(schema_text: str, path: str) -> tuple[list[str], dict[str, Any] | str] | None:
    """The field a `$.a.b` path names in an Avro record schema: (names, its Avro type); None
    when the schema has no such field. A union with null is its other branch."""
    node: Any = json.loads(schema_text)
    names = path[2:].split(".")
    for name in names:
        node = _non_null(node)
        if not isinstance(node, dict) or node.get("type") != "record":
            return None
        field = next((f for f in node.get("fields", []) if f.get("name") == name), None)
        if field is None:
            return None
        node = field["type"]
    return names, _non_null(node)


def required_fields(schema_text: str) -> list[str]:
    """The top-level fields that can never be null (no union with null)."""
    node = json.loads(schema_text)
    return [f["name"] for f in node.get("fields", []) if not nullable(f["type"])]


def nullable(avro_type: Any) -> bool:
    """Whether an Avro type takes null: null itself, or a union with it."""
    return avro_type == "null" or isinstance(avro_type, list) and "null" in avro_type


def _non_null(node: Any) -> Any:
    if isinstance(node, list):
        rest = [t for t in node if t != "null"]
        return rest[0] if len(rest) == 1 else rest
    return node


def is_time_type(avro_type: Any) -> bool:
    return isinstance(avro_type, dict) and avro_type.get("logicalType") in TIME_TYPES


def decoded_field(decoded: Column, names: list[str]) -> Column:
    col = decoded
    for name in names:
        col = col.getField(name)
    return col


def avro_columns(value: Column, framed: bool, schemas: dict[int, RegistrySchema],
                 id_path: str, time_path: str | None, time_format: str,
                 extra: tuple[str, ...] = ()
                 ) -> tuple[Column, Column | None, Column, list[Column]]:
    """(id text, event time, reason, the `extra` paths' texts) columns of Avro values.

    `schemas` maps schema id to its schema (or its problem); a value written without a
    registry (`framed` false) is decoded with the one schema under key 0. An extra path the
    schema lacks is null.
    """
    from kafka_recon.spark.records import event_time

    if framed:
        is_framed, sid, payload = framing(value)
    else:
        is_framed, sid, payload = value.isNotNull(), F.lit(0).cast("long"), value
    ids: list[tuple[Column, Column]] = []
    times: list[tuple[Column, Column]] = []
    extras: list[list[tuple[Column, Column]]] = [[] for _ in extra]
    reasons: list[tuple[Column, Column]] = [(~is_framed, unframed_reason(value))]
    for k, schema in sorted(schemas.items()):
        mine = is_framed & (sid == k)
        if schema.text is None:
            reasons.append((mine, F.lit(schema.problem)))
            continue
        decoded = F.when(mine, from_avro(payload, schema.text, {"mode": "PERMISSIVE"}))
        # PERMISSIVE gives a struct of nulls for bytes it cannot decode: such a struct (a
        # required field null) is refused before `to_avro`, which cannot encode it
        complete = decoded.isNotNull()
        for name in required_fields(schema.text):
            complete = complete & decoded.getField(name).isNotNull()
        exact = F.coalesce(F.when(complete, to_avro(decoded, schema.text) == payload),
                           F.lit(False))
        where = f" (schema id {k})" if framed else ""
        reasons.append((mine & ~exact, F.lit(f"the bytes do not decode as Avro of their "
                                             f"schema{where}")))
        ok = mine & exact
        for cases, path in zip(extras, extra, strict=True):
            if (xfound := avro_field(schema.text, path)) is not None:
                cases.append((ok, decoded_field(decoded, xfound[0]).cast("string")))
        found = avro_field(schema.text, id_path)
        if found is None:
            reasons.append((ok, F.lit(f"the schema{where} has no field {id_path}")))
        else:
            ids.append((ok, decoded_field(decoded, found[0]).cast("string")))
        if time_path is not None:
            tfound = avro_field(schema.text, time_path)
            if tfound is None:
                reasons.append((ok, F.lit(f"the schema{where} has no field {time_path}")))
            else:
                col = decoded_field(decoded, tfound[0])
                times.append((ok, col.cast("timestamp") if is_time_type(tfound[1])
                              else event_time(col.cast("string"), time_format)))
    if framed:
        known = F.lit(False)
        for k in schemas:
            known = known | (sid == k)
        reasons.append((is_framed & ~known, _unseen(sid)))
    return (_first(ids), _first(times) if time_path is not None else None, _first(reasons),
            [_first(cases) for cases in extras])


def _unseen(sid: Column) -> Column:
    """The reason of a schema id that appeared after the window's schemas were read."""
    return F.concat(F.lit("schema id "), sid.cast("string"),
                    F.lit(" was not seen when the window's schemas were read"))


def _first(cases: list[tuple[Column, Column]]) -> Column:
    """The value of the first case whose condition holds (null when none does)."""
    if not cases:
        return F.lit(None)
    out = F.when(cases[0][0], cases[0][1])
    for cond, val in cases[1:]:
        out = out.when(cond, val)
    return out


def json_schema_value(value: Column, schemas: dict[int, RegistrySchema]
                      ) -> tuple[Column, Column]:
    """(the JSON text of a JSON Schema value, reason when it has none)."""
    is_framed, sid, payload = framing(value)
    reasons: list[tuple[Column, Column]] = [(~is_framed, unframed_reason(value))]
    known = F.lit(False)
    for k, schema in sorted(schemas.items()):
        if schema.text is None:
            reasons.append((is_framed & (sid == k), F.lit(schema.problem)))
        else:
            known = known | (sid == k)
    reasons.append((is_framed & ~known, _unseen(sid)))
    return F.when(is_framed & known, payload), _first(reasons)
