"""How Spark reads a `table` tier: an Iceberg or Delta table, or Parquet files.

The window is a predicate on the event-time column, handed to the table's reader, so a table
partitioned by time (Iceberg's hidden partitions, a Delta partition column) can skip the files
outside it. A versioned table is
read at one state, named in the result: the Iceberg snapshot or Delta version current when the
run began (or the tier's `as_of`), so a re-run can read the same state again.

Anything that cannot be read (a table or path that does not exist, a catalog that does not
answer, a column that is missing or not a time) is a `TableTierError` naming the tier, the
table and what is wrong: the run is inconclusive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka_recon.config import TableTier
from kafka_recon.errors import TableTierError
from kafka_recon.runfiles.aggregates import StreamWriter
from kafka_recon.window import Window, from_micros, iso_z, micros

if TYPE_CHECKING:  # Spark is handed in by the step that reads: the sources never start one
    from pyspark.sql import Column, DataFrame, SparkSession

# id columns whose text would not be the id: a float prints 1.0E10, a binary as bytes
_NOT_IDS = ("float", "double", "binary", "array", "map", "struct")
_TIMES = ("timestamp", "timestamp_ntz", "date", "string")


@dataclass(frozen=True)
class TableRead:
    records: DataFrame  # (id text, event_time timestamp), the window's
    as_of: int | None   # the Iceberg snapshot or Delta version read
    writers: list[StreamWriter] | None = None  # a Delta table's streaming writers


def _what(tier: TableTier) -> str:
    return f"tier '{tier.name}' ({tier.format} table {tier.table})"


def _first_line(exc: BaseException) -> str:
    """What failed, in one line: Spark's own message, or for an error raised in the JVM (over
    Py4J, which says only which call failed) the Java exception and its root cause."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        root = java
        while root.getCause() is not None and root.getCause() is not root:
            root = root.getCause()
        outer, inner = str(java.toString()), str(root.toString())
        text = outer if inner == outer else f"{outer} (caused by {inner})"
    else:
        text = str(getattr(exc, "desc", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _current_state(spark: SparkSession, tier: TableTier) -> int | None:
    """The snapshot (Iceberg) or version (Delta) the table is at: one metadata row."""
    if tier.format == "iceberg":
        rows = spark.sql(f"SELECT snapshot_id FROM {tier.table}.history "
                         "WHERE is_current_ancestor ORDER BY made_current_at DESC LIMIT 1"
                         ).collect()
    else:
        path = tier.table.replace("`", "``")
        rows = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()
    return int(rows[0][0]) if rows else None


def _load(spark: SparkSession, tier: TableTier) -> tuple[DataFrame, int | None]:
    if tier.format == "parquet":
        return spark.read.parquet(tier.table), None
    if tier.format == "iceberg":
        for key, value in tier.spark_settings().items():  # a catalog may be set at runtime
            spark.conf.set(key, value)
    as_of = tier.as_of if tier.as_of is not None else _current_state(spark, tier)
    reader = spark.read.format(tier.format)
    if as_of is not None:
        reader = reader.option("snapshot-id" if tier.format == "iceberg" else "versionAsOf",
                               str(as_of))
    return reader.load(tier.table), as_of


def _writers(spark: SparkSession, tier: TableTier, window: Window, as_of: int | None
             ) -> list[StreamWriter] | None:
    """The streaming queries that committed to a Delta table from the window's start on (up to
    the version read): per query its epochs, times and commits, from the table's history,
    aggregated in Spark (a row per query). A query that starts again at epoch 0 is a writer
    that lost its checkpoint: the cause of a loss (kafka_recon.result.causes)."""
    from pyspark.sql import functions as F

    if tier.format != "delta":
        return None
    path = tier.table.replace("`", "``")
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`")
    epoch = F.col("operationParameters").getItem("epochId").try_cast("long")
    streamed = history.where((F.col("operation") == "STREAMING UPDATE")
                             & (F.col("timestamp") >= F.lit(window.start))
                             & (F.col("version") <= F.lit(as_of if as_of is not None else
                                                          2**62)))
    rows = (streamed.groupBy(F.col("operationParameters").getItem("queryId").alias("q"))
            .agg(F.min(epoch).alias("first"), F.max(epoch).alias("last"),
                 micros(F.min("timestamp")).alias("first_at"),
                 micros(F.max("timestamp")).alias("last_at"), F.count("*").alias("commits"))
            .orderBy("first_at").collect())
    return [StreamWriter(query_id=str(r["q"]), first_epoch=int(r["first"] or 0),
                         last_epoch=int(r["last"] or 0), first_at=iso_z(from_micros(r["first_at"])),
                         last_at=iso_z(from_micros(r["last_at"])), commits=int(r["commits"]))
            for r in rows]


def _column(tier: TableTier, df: DataFrame, name: str, role: str) -> str:
    types = dict(df.dtypes)
    found = next((c for c in types if c.lower() == name.lower()), None)
    if found is None:
        raise TableTierError(f"{_what(tier)}: no {role} column '{name}' (it has "
                             f"{', '.join(types)})")
    return found


def _event_time(tier: TableTier, df: DataFrame, name: str) -> Column:
    from pyspark.sql import functions as F

    kind = dict(df.dtypes)[name]
    if kind not in _TIMES:
        raise TableTierError(f"{_what(tier)}: event_time column '{name}' is {kind}, not a time "
                             "(a timestamp, a date or ISO 8601 text)")
    col = F.col(f"`{name}`")
    # text as every tier's: ISO 8601, UTC without an offset; a bad one is null, never a failure
    return col.try_cast("timestamp") if kind == "string" else col.cast("timestamp")


def read_table(spark: SparkSession, tier: TableTier, window: Window) -> TableRead:
    """The tier's (id, event_time) records of the window, ids as text, and the state read."""
    from pyspark.sql import functions as F

    try:
        df, as_of = _load(spark, tier)
    except TableTierError:
        raise
    except Exception as exc:  # AnalysisException, a catalog's own errors over Py4J or Connect
        raise TableTierError(f"{_what(tier)}: {_first_line(exc)}") from None
    id_col = _column(tier, df, tier.id, "id")
    if dict(df.dtypes)[id_col].split("<")[0] in _NOT_IDS:
        raise TableTierError(f"{_what(tier)}: id column '{id_col}' is "
                             f"{dict(df.dtypes)[id_col]}: its text would not be the id")
    when = _event_time(tier, df, _column(tier, df, tier.event_time, "event_time"))
    start, end = window.start, window.end
    records = (df.where((when >= F.lit(start)) & (when < F.lit(end)))
               .select(F.col(f"`{id_col}`").cast("string").alias("id"),
                       when.alias("event_time")))
    try:
        writers = _writers(spark, tier, window, as_of)
    except Exception as exc:  # the history is evidence: a table read without it stays read
        import logging

        logging.getLogger(__name__).warning("%s: its commit history was not read: %s",
                                            _what(tier), _first_line(exc))
        writers = None
    return TableRead(records, as_of, writers)
