"""The id files: sorted RFC 4180 CSV with a header, every file in one job."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

pyspark = pytest.importorskip("pyspark")
from pyspark.sql import SparkSession  # noqa: E402

from kafka_recon.spark import idfiles as idf  # noqa: E402
from tests.unit.spark.frames import at, table  # noqa: E402


def test_id_files_are_rfc4180_sorted_with_a_header_each_written_in_one_job(
        spark: SparkSession, tmp_path: Path) -> None:
    import csv

    odd = ["b", "a,1", 'say "hi"', "two\nlines", " padded ", "10", "9"]
    many = [str(i) for i in range(3000)]
    files = [idf.IdFile(tmp_path / "missing" / "x.csv", ("id",),
                      idf.id_rows(table(spark, [(i, at(1)) for i in odd]), ["id"], "id")),
             idf.IdFile(tmp_path / "missing" / "y.csv", ("id",),
                      idf.id_rows(table(spark, [(i, at(1)) for i in many]).repartition(7),
                                ["id"], "id")),
             idf.IdFile(tmp_path / "missing" / "empty.csv", ("id",),
                      idf.id_rows(table(spark, []), ["id"], "id"))]
    idf.write_id_files(spark, files, tmp_path / ".scratch")
    with (tmp_path / "missing" / "x.csv").open(newline="", encoding="utf-8") as fh:
        assert [r["id"] for r in csv.DictReader(fh)] == sorted(odd)
    with (tmp_path / "missing" / "y.csv").open(newline="", encoding="utf-8") as fh:
        assert [r["id"] for r in csv.DictReader(fh)] == sorted(many)
    assert (tmp_path / "missing" / "empty.csv").read_text() == "id\n"
    assert not (tmp_path / ".scratch").exists()


def test_a_file_the_tallies_know_empty_is_its_header_and_runs_no_spark_job(
        spark: SparkSession, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    # rows that fail the job if anything reads them: a known-empty file must not be read
    never = table(spark, [("1", at(1))]).select(
        F.raise_error(F.lit("read a file known to be empty")).cast("string").alias("id"))
    empty = [idf.IdFile(tmp_path / "missing" / "a.csv", ("id",), idf.id_rows(never, ["id"], "id"),
                        empty=True),
             idf.IdFile(tmp_path / "duplicate" / "a.csv", ("id", "extra"),
                        idf.id_rows(never, ["id"], "id"), empty=True)]
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("known-empty", "known-empty id files")
    try:
        idf.write_id_files(spark, empty, tmp_path / ".scratch")
        assert tracker.getJobIdsForGroup("known-empty") == []
    finally:
        spark.sparkContext.setJobGroup("", "")
    # the same bytes as Spark writes for a file with no row (the test above)
    assert (tmp_path / "missing" / "a.csv").read_text() == "id\n"
    assert (tmp_path / "duplicate" / "a.csv").read_text() == "id,extra\n"
    # beside a file with rows: that one is written by the job, the empty one by the driver
    idf.write_id_files(spark, [
        idf.IdFile(tmp_path / "missing" / "b.csv", ("id",),
                   idf.id_rows(table(spark, [("7", at(1)), ("3", at(1))]), ["id"], "id")),
        *empty], tmp_path / ".scratch")
    assert (tmp_path / "missing" / "b.csv").read_text() == "id\n3\n7\n"
    assert (tmp_path / "missing" / "a.csv").read_text() == "id\n"
