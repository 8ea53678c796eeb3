"""One local SparkSession for every Spark unit test (module-scoped sessions would each start a
JVM)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("pyspark")
from pyspark.sql import SparkSession  # noqa: E402


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    import os
    import sys

    from kafka_recon.settings import spark_jars
    from kafka_recon.spark.session import session

    # Python workers (a UDF) run this environment's Python, as a deployment's PYSPARK_PYTHON
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # the package's own jars (spark-avro: Avro values are read by from_avro)
    # the tests' windows are small: the session a small window gets (its heap, its JIT)
    s = session("kafka-recon unit", master="local[1]", jars=spark_jars(), records=1000)
    yield s
    s.stop()


@pytest.fixture(params=["Asia/Shanghai", "America/New_York"])
def host_zone(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """This Python process on a host zone other than UTC (east, and west with daylight saving),
    as many hosts that run pipelines are: the JVM stays on UTC, as kafka-recon starts it."""
    import time

    monkeypatch.setenv("TZ", request.param)
    time.tzset()
    yield request.param
    monkeypatch.undo()
    time.tzset()
