"""How a record's id and event time are read, the same way for every tier: pure Spark columns.

Ids are compared as text, after one normalisation (docs/flows.md, "How ids are compared"):

- a number written with a fractional part of zeros is the integer: `1.0` and `-12.000` are
  `1` and `-12`; `-0` is `0` (a JSON number and an SQL integer of the same value are one id);
- nothing else changes: leading zeros, case, spaces at either end, any character are kept, so
  `007` and `7` are two ids, and a string id reads back exactly from the id files;
- SQL ids are read as text by the database (`CAST(id AS TEXT)`), never through a 32-bit or a
  floating-point type; JSON numbers keep every digit; a Kafka key or value is read as UTF-8
  text, and one that is not valid UTF-8 has no id (the record is unidentifiable, never dropped).

An event time that cannot be read (absent, or not a time in the flow's format) leaves the record
unidentifiable; it never stops the run.
"""

from __future__ import annotations

from decimal import Decimal

from pyspark.sql import Column
from pyspark.sql import functions as F

# microseconds per unit, as exact decimals: a double would round nanoseconds
EPOCH_UNITS = {"epoch_s": "1000000", "epoch_ms": "1000", "epoch_us": "1", "epoch_ns": "0.001"}


def normalise_id(text: Column) -> Column:
    # the regex only where it can match: it decodes, matches and re-encodes every id it sees
    # (0.4 of 0.5 us per id here), and most ids have no point
    integral = F.when(text.contains("."),
                      F.regexp_replace(text, r"^(-?[0-9]+)\.0+$", "$1")).otherwise(text)
    return F.when(integral == "-0", F.lit("0")).otherwise(integral)


def utf8_text(raw: Column) -> Column:
    """Bytes as UTF-8 text; null when they are not valid UTF-8 (no id can be read)."""
    text = raw.cast("string")
    return F.when(F.call_function("is_valid_utf8", text), text)


def event_time(text: Column, fmt: str) -> Column:
    """A timestamp from the field's text in the flow's format; null when it is not one.

    `iso8601` (default): `2026-11-20T08:00:00Z`, with or without an offset or a `T`; a time
    without an offset is UTC. `epoch_s`, `epoch_ms`, `epoch_us`, `epoch_ns`: a number since
    1970-01-01 UTC (fractions allowed). Anything else is a Spark datetime pattern
    (`dd/MM/yyyy HH:mm:ss`), read as UTC.
    """
    if fmt == "iso8601":
        return text.try_cast("timestamp")
    if fmt in EPOCH_UNITS:
        unit = F.lit(Decimal(EPOCH_UNITS[fmt]))
        micros = F.floor(text.try_cast("decimal(38,9)") * unit)
        return F.timestamp_micros(micros.try_cast("long"))
    return F.try_to_timestamp(text.cast("string"), F.lit(fmt))
