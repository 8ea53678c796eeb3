"""The reconciliation's Spark jobs on a Spark standalone master and worker (from PySpark's
install), not only local[*]: the executors on the worker read Kafka and write the id files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.services.kafka import KafkaCluster
from harness.services.spark import SparkStandalone
from tests.integration.engine_harness import END, START, Scenario

pytestmark = pytest.mark.integration


def test_the_jobs_find_the_same_loss_on_a_standalone_master_and_worker(kafka: KafkaCluster,
                                                                       tmp_path: Path) -> None:
    scn = Scenario(tmp_path, kafka.bootstrap)
    scn.flow_through(60, sink_lacks={7, 42})
    out = tmp_path / "out"
    with SparkStandalone(tmp_path / "spark", cores=1, memory="1g") as cluster:
        done = subprocess.run(
            [str(Path(sys.executable).parent / "kafka-recon"), "run", "--config",
             str(scn.config), "--flow", "f", "--start", START.isoformat(), "--end",
             END.isoformat(), "--out", str(out), "--master", cluster.master],
            capture_output=True, text=True, timeout=900, check=False,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable})
        state = cluster.state()
    assert done.returncode == 1, done.stderr[-3000:]
    assert "2 record(s) lost on the consume side (topic->sink)" in done.stdout
    assert sorted((out / "missing" / "topic__sink.csv").read_text().split()) == ["42", "7", "id"]
    # the master ran it, and its worker started executors for it
    assert [a["name"] for a in state["completedapps"]] == ["kafka-recon f"]
    assert list((tmp_path / "spark" / "work").glob("app-*/*/stderr")), \
        "no executor ran on the worker"
