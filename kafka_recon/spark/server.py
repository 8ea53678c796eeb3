"""One Spark kept running for many runs: a Spark Connect server with kafka-recon's settings.

A run that starts a Spark of its own pays for a fresh JVM every time: about 5 s to start, and
8-9 s more on its first Kafka read while classes load and the JIT compiles the hot code
(docs/performance-history.md). A daily reconciliation runs many flows: `kafka-recon spark-server`
starts that Spark once, and `kafka-recon run --remote sc://host:port` (or
`KAFKA_RECON_SPARK_REMOTE`) gives each run a session of it. The server is started with what a
run's own Spark would have: the window reader, the Kafka client and JDBC drivers, the JVMs on
UTC with kafka-recon's options, the driver's class archive; each session sets its own SQL settings
(`conf.session_conf`). It listens on loopback unless told otherwise: a session sends the
flow's Kafka and database credentials to it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pyspark

from kafka_recon.config import DELTA_SPARK
from kafka_recon.settings import class_archive_path, jars_dir, spark_jars
from kafka_recon.spark.conf import (
    CONNECT_PORT,
    DEFAULTS,
    archive_options,
    cluster_defaults,
    driver_conf,
    spark_conf,
)

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def spark_submit() -> Path:
    """The spark-submit of the installed pyspark: the server's jars are its version's."""
    return Path(pyspark.__file__).parent / "bin" / "spark-submit"


def server_argv(master: str, host: str, port: int, jars: list[str], conf: dict[str, str],
                submit: Path) -> list[str]:
    """spark-submit's command line for the server (a pure function: tests snapshot it)."""
    argv = [str(submit), "--class", SERVER_CLASS, "--name", "kafka-recon spark-server",
            "--master", master]
    if jars:
        argv += ["--jars", ",".join(jars)]
    settings = {**conf, "spark.connect.grpc.binding.address": host,
                "spark.connect.grpc.binding.port": str(port)}
    for key, value in settings.items():
        argv += ["--conf", f"{key}={value}"]
    return [*argv, "spark-internal"]


def server_command(master: str, host: str = "127.0.0.1", port: int = CONNECT_PORT
                   ) -> tuple[list[str], dict[str, str]]:
    """The server's command line and environment, with kafka-recon's jars and settings."""
    # a server is shared by many runs: kafka-recon's defaults go on its command line, under
    # whatever the host's spark-defaults.conf says
    cluster = cluster_defaults()
    conf = driver_conf({**{k: v for k, v in DEFAULTS.items() if k not in cluster},
                        **spark_conf(cluster=cluster)}, archive_options(class_archive_path()))
    # a server serves every flow: with the lake jars where they are installed, it reads
    # Iceberg and Delta tables too (Delta's session settings must be there from its start)
    lake = (jars_dir() / "lake").is_dir()
    if lake:
        conf = {**DELTA_SPARK, **conf}
    # and it writes to whichever run folder a run names: with S3A where it is installed, a
    # run's `--out s3://...` works whatever the runs root is
    objects = (jars_dir() / "s3").is_dir()
    env = {**os.environ}
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    return server_argv(master, host, port, spark_jars(lake=lake, objects=objects), conf,
                       spark_submit()), env
