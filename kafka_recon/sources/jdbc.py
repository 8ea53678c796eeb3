"""How Spark reads a `sql` tier's id query itself, over JDBC, in parallel.

The flow config names a database by SQLAlchemy URL (or Airflow connection id); Spark needs a JDBC
URL. Ids never pass through an Airflow worker: Spark reads them, split into time slices (one JDBC
query per slice, run in parallel by the executors).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from kafka_recon.config import SqlTier
from kafka_recon.sources.connections import resolve
from kafka_recon.sources.dialects import id_as_text, jdbc_source
from kafka_recon.window import Window

if TYPE_CHECKING:  # Spark is handed in by the step that reads: the sources never start one
    from pyspark.sql import DataFrame, SparkSession

def _literal(t: datetime) -> str:
    # naive UTC text: compares right with SQLite text columns and casts to PostgreSQL's and
    # MySQL's times (every session is in UTC: kafka_recon.sources.dialects)
    return "'" + t.strftime("%Y-%m-%d %H:%M:%S") + "'"


def bind_window(query: str, start: datetime, end: datetime) -> str:
    """Put the window into the query as literals (JDBC reads cannot bind :start/:end)."""
    out = re.sub(r":start\b", _literal(start), query)
    return re.sub(r":end\b", _literal(end), out)


def slice_predicates(window: Window, slices: int) -> list[str]:
    """WHERE clauses splitting [start, end) on event_time: one parallel JDBC read each."""
    start, end = (t.replace(tzinfo=None) for t in (window.start, window.end))
    step = (end - start) / max(1, slices)
    bounds = [start + step * i for i in range(slices)] + [end]
    bounds = [b - timedelta(microseconds=b.microsecond) for b in bounds]
    preds = []
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        if lo < hi:
            preds.append(f"event_time >= {_literal(lo)} AND event_time < {_literal(hi)}")
    # whatever the slices do not cover (a NULL, an unexpected format) is still read, and counted
    preds.append(f"event_time IS NULL OR NOT (event_time >= {_literal(start)} "
                 f"AND event_time < {_literal(end)})")
    return preds


def _read(spark: SparkSession, tier: SqlTier, window: Window, slices: int, id_name: str,
          columns: str) -> DataFrame:
    """The tier's id query, its id cast to exact text as `id_name` beside `columns` (of the
    query's rows, aliased `kafka_recon_rows`), read over JDBC in event-time slices."""
    url = resolve(tier.conn)
    src = jdbc_source(url)
    start, end = (t.replace(tzinfo=None) for t in (window.start, window.end))
    table = (f"(SELECT CAST(id AS {id_as_text(url)}) AS {id_name}, {columns} FROM "
             f"({bind_window(tier.ids or '', start, end)}) kafka_recon_rows) kafka_recon_q")
    return spark.read.jdbc(src.url, table, predicates=slice_predicates(window, slices),
                           properties={**src.properties, "customSchema": f"{id_name} STRING"})


def read_ids(spark: SparkSession, tier: SqlTier, window: Window, slices: int) -> DataFrame:
    """The tier's id query as (id, event_time), read by Spark over JDBC in `slices` parallel
    event-time slices (plus one for whatever they do not cover). The id arrives as text:
    the database casts it (a JDBC driver would read a SQLite INTEGER as a 32-bit int and a
    NUMERIC as a double, cutting 64-bit and longer ids) and Spark is told so (the SQLite
    driver types an expression column NUMERIC). The event time is as the database gives it."""
    return _read(spark, tier, window, slices, "id", "event_time")


def read_rows(spark: SparkSession, tier: SqlTier, window: Window, slices: int) -> DataFrame:
    """Every column of the tier's id query, with its id as exact text in `kafka_recon_id`:
    the upstream rows a write-side repair publishes again, read as `read_ids` reads ids."""
    return _read(spark, tier, window, slices, "kafka_recon_id", "kafka_recon_rows.*")
