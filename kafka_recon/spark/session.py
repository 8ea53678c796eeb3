"""The SparkSession every kafka-recon job uses, under spark-submit, in process, or of a Spark
Connect server. Its settings are `kafka_recon.spark.conf` (which Airflow's operator reads too,
without importing Spark)."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from collections.abc import Iterable
from urllib.parse import urlsplit

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from kafka_recon.errors import SparkUnavailable, one_line
from kafka_recon.settings import class_archive_path, shown_remote
from kafka_recon.spark.conf import (
    CONNECT_PORT,
    DEFAULTS,
    SHUFFLE_PARTITIONS,
    UTC_JVM,
    archive_options,
    driver_conf,
    session_conf,
    shuffle_partitions,
    spark_conf,
)


def session(app: str, master: str | None = None, jars: list[str] | None = None,
            driver_options: str | None = None, remote: str | None = None,
            given: dict[str, str] | None = None, records: int | None = None) -> SparkSession:
    """A session with kafka-recon's settings. In process (`master`), the builder gets them and
    `given` (a flow's `spark:` block); under spark-submit, the command line already has them,
    and the builder adds nothing the cluster could not override. The driver maps the class
    archive when there is one (`kafka_recon.spark.classes`), unless `driver_options` replaces
    that. With `remote` (a Spark Connect URL), a session of the server's (`remote_session`).
    kafka-recon's defaults are then set where nobody set them (`apply_defaults`). `records`,
    the window's size when known, fixes the driver's heap (`conf.driver_heap`)."""
    if remote:
        spark = remote_session(remote)
    else:
        builder = SparkSession.builder.appName(app)
        if master:
            # the workers run this Python, which has kafka-recon's packages: Spark's default is
            # whatever `python3` comes first on PATH, which outside an activated virtualenv
            # has none of them (`repair deliver` failed with No module named 'upath')
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            if driver_options is None:
                driver_options = archive_options(class_archive_path())
            builder = builder.master(master)
            if jars:
                builder = builder.config("spark.jars", ",".join(jars))
            for key, value in driver_conf(spark_conf(given, records=records),
                                          driver_options).items():
                builder = builder.config(key, value)
        spark = builder.getOrCreate()
    apply_defaults(spark)
    return spark


def _set_by_someone(spark: SparkSession, key: str, spark_default: str) -> bool:
    """Whether the cluster, the connection or the flow set `key`: in the application's own
    settings; a Spark Connect server's are seen only as a value other than Spark's default."""
    if is_remote(spark):
        return (spark.conf.get(key, spark_default) or spark_default) != spark_default
    return bool(spark.sparkContext.getConf().contains(key))


def cores(spark: SparkSession) -> int:
    """The cores this Spark runs tasks on (a Spark Connect server's are not known: 2)."""
    return 2 if is_remote(spark) else int(spark.sparkContext.defaultParallelism)


def apply_defaults(spark: SparkSession, records: int | None = None,
                   grow_only: bool = False) -> None:
    """kafka-recon's defaults where nobody set them, and the shuffle partitions for a window of
    about `records` records on this Spark's cores (`conf.shuffle_partitions`); `grow_only`:
    never fewer than already set (a larger tier was seen first)."""
    for key, value in DEFAULTS.items():
        if not is_remote(spark) and not _set_by_someone(spark, key, ""):
            spark.conf.set(key, value)
    if _set_by_someone(spark, SHUFFLE_PARTITIONS, "200"):
        return
    wanted = shuffle_partitions(records, cores(spark))
    current = spark.conf.get(SHUFFLE_PARTITIONS, None)
    if grow_only and current is not None and current.isdigit() and int(current) >= wanted:
        return
    spark.conf.set(SHUFFLE_PARTITIONS, str(wanted))


def set_hadoop(spark: SparkSession, settings: dict[str, str]) -> None:
    """Hadoop settings on the session (its file systems read them when first used), each only
    where the cluster, the connection or the flow did not set `spark.hadoop.<key>`."""
    for key, value in settings.items():
        if not _set_by_someone(spark, f"spark.hadoop.{key}", ""):
            spark.conf.set(key, value)


def remote_session(url: str) -> SparkSession:
    """A session of a running Spark Connect server (`kafka_recon.spark.server`): one Spark,
    started once and kept warm, for many runs. The server must have kafka-recon's JVM options
    (its JVMs on UTC) and jars; a server that cannot be reached or is off UTC is a
    `SparkUnavailable` naming it."""
    shown = shown_remote(url)
    # the client retries a server that does not answer for minutes: a run that cannot reach
    # its Spark says so now
    where = urlsplit(shown)  # checked by settings.spark_remote
    address = (where.hostname or "", where.port or CONNECT_PORT)
    try:
        socket.create_connection(address, timeout=10).close()
    except OSError as exc:
        raise SparkUnavailable(f"Spark Connect server {shown}: cannot be used (nothing answers "
                               f"at {address[0]}:{address[1]}: {exc.strerror or exc})") from exc
    builder = SparkSession.builder.remote(url)
    for key, value in session_conf().items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
        options = {key: spark.conf.get(key, "") or "" for key in
                   ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")}
    except Exception as exc:
        raise SparkUnavailable(f"Spark Connect server {shown}: cannot be used "
                               f"({one_line(exc)})") from exc
    off = [key for key, value in options.items() if UTC_JVM not in value.split()]
    if off:
        spark.stop()
        raise SparkUnavailable(f"Spark Connect server {shown}: its JVMs are not on UTC ({off[0]} "
                               f"lacks {UTC_JVM}); start it with `kafka-recon spark-server`")
    return spark


def is_remote(spark: SparkSession) -> bool:
    """A Spark Connect session: no SparkContext on this side."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


# Spark's column cache compresses each column of a batch by the best of its encodings, and to
# choose, it sizes every encoding over every value. For a tier's records (unique ids, offsets,
# digests) that choice took a fifth of the task samples while the replay filled its cache and a
# third while the tally filled the SQL tiers' (a flight recording at 1M), and finds little to
# shrink. The comparison's cache, read by every later job, stays compressed: uncompressed, the
# reconcile took longer. Measured with the records plain: the first replay 16-18% shorter, the
# run 0.95 x at 50M, within the noise at 10M (docs/performance-history.md).
RECORDS_COMPRESSED = False
_COMPRESSED = "spark.sql.inMemoryColumnarStorage.compressed"


def cache_records(df: DataFrame) -> DataFrame:
    """`df` cached as a tier's records are (`RECORDS_COMPRESSED`). Spark takes the compression
    setting when `cache()` is called, not when the cache is filled, so it is set around the
    call alone and the session's own setting is put back."""
    spark = df.sparkSession
    was = spark.conf.get(_COMPRESSED, None)
    spark.conf.set(_COMPRESSED, str(RECORDS_COMPRESSED).lower())
    try:
        return df.cache()
    finally:
        if was is None:
            spark.conf.unset(_COMPRESSED)
        else:
            spark.conf.set(_COMPRESSED, was)


def release(frames: Iterable[DataFrame]) -> None:
    """Each cached frame let go. A frame that cannot be (its Spark has stopped, as it does when
    a job kills its driver) is left: releasing runs on the way out of a failed step too, and an
    error here would be raised in place of the step's own, the one a run's reason must name."""
    for df in frames:
        with contextlib.suppress(Exception):  # the step's own error, if any, is the one raised
            df.unpersist()


def names(*columns: str) -> list[Column]:
    """Columns named, unresolved, to group by. Spark Connect's client checks a name given as
    text against the frame's schema first: a round trip to the server per frame, about 40 ms
    through a warm server, a dozen in a run (docs/performance-history.md)."""
    return [F.col(c) for c in columns]
