"""Real services for the integration tier: Apache Kafka on loopback, started from the Maven jars."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.services.kafka import KafkaCluster
from harness.services.kafka_security import Security


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """One single-node KRaft broker shared by the session; tests use their own topics.

    It is secured as production clusters are (SASL_SSL with SCRAM and PLAIN, SSL with client
    certificates, StandardAuthorizer denying what no ACL allows); its PLAINTEXT listener is
    the platform's internal one, a super user's, which tests use to set the stage."""
    base = tmp_path_factory.mktemp("kafka")
    cluster = KafkaCluster(base / "cluster", size=1, security=Security(base / "certs")).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def artifacts_dir() -> Path:
    """Kept after the run (CI can publish it): reports, mails, screenshots."""
    path = Path(__file__).resolve().parents[2] / "test-artifacts"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One in-process Spark (local[2]) with the Kafka connector and JDBC drivers as local jars."""
    import os
    import sys

    from kafka_recon.settings import spark_jars
    from kafka_recon.spark.session import session

    # Python workers (a repair's delivery publishes from them) run this environment's Python,
    # as a deployment's PYSPARK_PYTHON says
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # the tests' windows are small: the session a small window gets (its heap, its JIT)
    s = session("kafka-recon integration", master="local[2]", jars=spark_jars(), records=1000)
    s.sparkContext.setLogLevel("WARN")
    yield s
    s.stop()


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A private PostgreSQL server (Debian's package) on loopback."""
    import shutil
    import tempfile

    from harness.services.postgres import PostgresServer

    # not under pytest's tmp folder: pytest keeps that private (0700) to root, and the server
    # runs as the postgres user
    base = Path(tempfile.mkdtemp(prefix="kafka-recon-pg-"))
    server = PostgresServer(base).start()
    yield server
    server.stop()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def spark_connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One Spark Connect server as `kafka-recon spark-server` starts it, for every test that
    runs through one (as a deployment shares one between flows): started once, warm after."""
    from harness.services.spark import SparkConnect

    server = SparkConnect(tmp_path_factory.mktemp("spark-connect")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session", autouse=True)
def _private_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """This pytest process's own kafka-recon home. A run that names no runs root (one started
    in process, or a command line without KAFKA_RECON_OUT) keeps its store and its window
    leases in the home's runs folder: not the checkout's `runs/` nor `~/airflow`, which the
    other xdist worker would share (two runs of flow 'f' over the same window, one refused)."""
    import os

    if "KAFKA_RECON_HOME" in os.environ:
        yield
        return
    os.environ["KAFKA_RECON_HOME"] = str(tmp_path_factory.mktemp("home"))
    try:
        yield
    finally:
        os.environ.pop("KAFKA_RECON_HOME", None)
