"""One local SparkSession for every Spark unit test (module-scoped sessions would each start a
JVM)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("pyspark")
from pyspark.sql import SparkSession  # noqa: E402


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from kafka_recon.spark.session import session

    s = session("kafka-recon unit", master="local[1]")
    yield s
    s.stop()
