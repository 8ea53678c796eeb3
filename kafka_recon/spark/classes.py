"""The Spark driver's class archive: the classes a run loads, mapped from one file.

A Spark driver loads, verifies and links tens of thousands of classes from jars before its
first job, and more during it; on two cores that was 7-8 s of each run's start and a few more
seconds of its first job. HotSpot's class data sharing (AppCDS) keeps classes once parsed and
verified in an archive the JVM maps at start. At 1M records a run took 54.0 s with an archive
and 59.6 without (medians of 3 interleaved runs; the Spark start 4.3-4.7 s instead of 6.6-8.4,
the replay 2.5 s shorter; docs/performance-history.md, "The class archive").

`build` makes the archive: a short Spark application, in a JVM of its own, runs kafka-recon's
own steps on a few synthetic records (a replay's extraction and summary, the comparison, the
evidence, the id files, a JDBC read, Parquet) with `-XX:ArchiveClassesAtExit`, and once that
JVM has exited the archive is moved in place (a run starting meanwhile sees the old one or
none). `kafka_recon.spark.session.archive_options` names it to a driver JVM when it exists.
The JVM checks the archive itself: one made by another JVM build or for other Spark jars is
ignored, corrupt or absent too, and the run then loads its classes as before: only the time
differs, never the answer.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def build(target: Path, master: str = "local[2]", timeout_s: float = 600) -> Path:
    """Make the archive at `target` (replacing one there) from a training run in a new process;
    returns `target`. A training run that fails raises, and leaves any archive there as is."""
    from kafka_recon.errors import CannotRun

    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    scratch.unlink(missing_ok=True)
    try:
        done = subprocess.run([sys.executable, "-m", "kafka_recon.spark.classes", str(scratch),
                               master], capture_output=True, text=True, timeout=timeout_s,
                              check=False)
        if done.returncode != 0 or not scratch.is_file() or scratch.stat().st_size == 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise CannotRun(f"class archive {target}: the training run failed "
                            f"(exit {done.returncode}): {tail[0]}")
        scratch.replace(target)
        return target
    finally:
        scratch.unlink(missing_ok=True)


def train(spark: SparkSession, work: Path) -> None:
    """What a run does, on a few synthetic records: the classes it loads on the way are the
    ones the archive keeps."""
    import sqlite3
    from datetime import UTC, datetime, timedelta

    from kafka_recon.config import RecordSpec, SqlTier
    from kafka_recon.spark import compare as cp
    from kafka_recon.spark import evidence as ev
    from kafka_recon.spark import idfiles as idf
    from kafka_recon.spark import read as rd
    from kafka_recon.spark import replay as rp
    from kafka_recon.spark import tally as tl
    from kafka_recon.window import Window

    start = datetime(2026, 1, 1, tzinfo=UTC)
    end = start + timedelta(hours=1)
    n = 20_000
    ts = F.timestamp_seconds(F.lit(int(start.timestamp())) + F.col("id") % 3600)
    kafka_rows = spark.range(n).select(
        F.col("id").cast("string").cast("binary").alias("key"),
        F.to_json(F.struct(F.col("id").cast("string").alias("id"),
                           F.date_format(ts, "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("ts")))
        .cast("binary").alias("value"),
        (F.col("id") % 3).cast("int").alias("partition"), F.col("id").alias("offset"),
        ts.alias("timestamp"))
    record = RecordSpec(id="$.id", event_time="$.ts")
    topic = rp.extract_records(kafka_rows.withColumn("digest", rp.record_digest()),
                               record).cache()
    rp.summarize(topic, start, end).collect()
    rp.digests(kafka_rows, record).collect()
    topic.write.mode("overwrite").parquet(str(work / "replay"))
    topic = spark.read.parquet(str(work / "replay"))

    db = work / "upstream.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE t (id INTEGER, event_time TEXT)")
        c.executemany("INSERT INTO t VALUES (?, ?)",
                      [(i, f"{start + timedelta(seconds=i % 3600):%Y-%m-%d %H:%M:%S}")
                       for i in range(0, n, 2)])
    # the upstream read the way a run reads a sql tier, slices and all
    upstream = rd.read_sql_tier(spark, SqlTier(
        name="upstream", type="sql", conn=f"sqlite:///{db}",
        ids="SELECT id, event_time FROM t WHERE event_time >= :start AND event_time < :end"),
        Window(start, end))

    tiers = [rd.window_records(df, start, end, 60) for df in (upstream, topic)]
    tl.tallied(tl.reduce_union([
        tl.record_marks(topic, 1, start, end, 60, "kafka_ts", True),
        tl.record_marks(upstream, 0, start, end, 60, "event_time", False)]), records=True)
    compared = cp.compare(tiers).cache()
    marked = cp.marks(compared, 2, [(0, 1, [0])])
    tl.tallied(marked)
    found = marked.where(F.col("kind") == "unexpected")
    ranked = ev.rank_topic(tiers[1])
    ev.summaries({"runs": ev.runs_of(found, ranked),
                  "shape": ev.upstream_runs(found, tiers[0]),
                  "copies": ev.copies_of(found, ranked)})
    idf.write_id_files(spark, [idf.IdFile(work / "ids.csv", ("id",),
                                        idf.id_rows(found, ["id"], "id"))], work / "parts")


def _dump(scratch: Path, master: str) -> None:
    """The training run, in this process's own JVM, dumped to `scratch` as the JVM exits."""
    import tempfile

    from kafka_recon.settings import spark_jars
    from kafka_recon.spark.conf import QUIET
    from kafka_recon.spark.session import session

    spark = session("kafka-recon class archive", master=master, jars=spark_jars(),
                    driver_options=f"-XX:ArchiveClassesAtExit={shlex.quote(str(scratch))} "
                                   f"{QUIET}")
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory(prefix="kafka-recon-classes-") as work:
        train(spark, Path(work))
    gateway = spark.sparkContext._gateway
    assert gateway is not None
    spark.stop()
    # the archive is written as the JVM exits normally: this process waits for that, where
    # leaving would have the JVM killed on its way out
    with contextlib.suppress(Exception):  # the connection drops as the JVM exits: expected
        gateway.jvm.System.exit(0)
    gateway.proc.wait(timeout=300)


if __name__ == "__main__":
    _dump(Path(sys.argv[1]), sys.argv[2])
