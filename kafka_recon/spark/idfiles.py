"""The id files: every missing, unexpected, duplicate, filtered, late and unidentifiable id,
written in full as sorted RFC 4180 CSV by the executors, every file in one job, never through
the driver. A file the tallies already know to be empty is its header alone, written by the
driver: a window where nothing was lost runs no job for its id files."""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from upath import UPath

from kafka_recon.runfolder import RunFolder, move, remove, write_text


def csv_field(value: Column) -> Column:
    """A value as an RFC 4180 field: quoted, quotes doubled, when it holds a comma, a quote or a
    line break; nothing trimmed; an empty text as `""` (a line of its own would read as no
    row at all), null as an empty field."""
    text = value.cast("string")
    return (F.when(text.isNull(), F.lit(""))
            .when(text.rlike('^$|[",\r\n]'),
                  F.concat(F.lit('"'), F.regexp_replace(text, '"', '""'), F.lit('"')))
            .otherwise(text))


@dataclass(frozen=True)
class IdFile:
    """One id file to write: where, its header, and its rows as (line, s, p, o), sorted by the
    keys s (text), then p and o (numbers)."""
    target: Path | UPath
    columns: tuple[str, ...]
    rows: DataFrame
    # rows read off the findings' cache: one task reads them all. A task per cached partition
    # per file (50 at 1M for six files of a few hundred ids) cost more in task overhead than
    # the rows did; the file is written by one task anyway
    one_task: bool = False
    # the tallies counted no row for it (they count the very rows it would hold): it is its
    # header alone, and needs no Spark job
    empty: bool = False

    @property
    def header(self) -> str:
        """Its first line, the same whoever writes it (the job, or the driver when empty)."""
        return ",".join(self.columns)


def id_rows(df: DataFrame, columns: list[str], s: str | None, p: str | None = None,
            o: str | None = None) -> DataFrame:
    """A DataFrame's rows as an id file's CSV lines with their sort keys."""
    def key(c: str | None, kind: str) -> Column:
        return (F.col(c) if c else F.lit(None)).cast(kind)

    line = F.concat_ws(",", *[csv_field(F.date_format(F.col(c), "yyyy-MM-dd'T'HH:mm:ss.SSSXXX")
                                        if c == "event_time" else F.col(c)) for c in columns])
    return df.select(line.alias("line"), key(s, "string").alias("s"), key(p, "long").alias("p"),
                     key(o, "long").alias("o"))


def write_id_files(spark: SparkSession, files: list[IdFile], scratch: Path | UPath) -> None:
    """Every id file in one Spark job, each one sorted RFC 4180 CSV with its header, written by
    the executors (never through the driver): the rows of a file are hashed to one task, which
    writes them in order under the file's number; the driver then only moves each file in
    place. A file known to be `empty` is written as its header by the driver."""
    for f in files:
        if f.empty:
            write_text(f.target, f.header + "\n")
    files = [f for f in files if not f.empty]
    if not files:
        return
    # the headers made in the JVM: a DataFrame of Python rows would start a Python worker per
    # task to unpickle them (about 1 s each, the longest tasks of the job)
    n = F.col("id").cast("int")
    headers = spark.range(len(files), numPartitions=1).select(
        n.alias("file"), F.lit(0).alias("ord"),
        F.element_at(F.array(*[F.lit(f.header) for f in files]), n + 1).alias("line"),
        F.lit(None).cast("string").alias("s"), F.lit(None).cast("long").alias("p"),
        F.lit(None).cast("long").alias("o"))
    rows = reduce(lambda x, y: x.unionByName(y),
                  [(f.rows.coalesce(1) if f.one_task else f.rows)
                   .select(F.lit(i).alias("file"), F.lit(1).alias("ord"), "line", "s", "p", "o")
                   for i, f in enumerate(files)], headers)
    remove(scratch)
    (rows.repartition("file").sortWithinPartitions("file", "ord", "s", "p", "o", "line")
     .select("file", "line").write.mode("overwrite").partitionBy("file")
     .option("lineSep", "\n").text(str(scratch)))
    for i, f in enumerate(files):
        parts = sorted(p for p in (scratch / f"file={i}").iterdir()
                       if p.name.startswith("part-"))
        if len(parts) != 1:  # a file's rows are hashed to one task: one part, always
            raise RuntimeError(f"id file {f.target.name}: Spark wrote {len(parts)} parts, "
                               "expected 1")
        move(parts[0], f.target)
    remove(scratch)


def write_ids(df: DataFrame, target: UPath, folder: RunFolder) -> str:
    """One id file of ids alone, as `write_id_files` writes them."""
    write_id_files(df.sparkSession, [IdFile(target, ("id",), id_rows(df, ["id"], "id"))],
                   folder.path / ".ids.parts")
    return str(target)
