"""Runs through a Spark Connect server (`kafka-recon spark-server`, `run --remote`): one warm
Spark for many runs gives the answer a run's own Spark gives, and a server that cannot be used
leaves an inconclusive run naming it, never an ok one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.services.kafka import KafkaCluster
from harness.services.ports import HOST, free_port
from harness.services.spark import SparkConnect
from kafka_recon.runfiles.outcomes import Timings
from kafka_recon.runfolder import RunFolder
from kafka_recon.settings import spark_jars
from kafka_recon.spark.server import SERVER_CLASS, spark_submit
from tests.integration.engine_harness import END, START, Scenario, at

pytestmark = pytest.mark.integration

ID_FILES = ("missing/topic__sink.csv", "duplicate/db__topic.csv",
            "missing/db__topic.csv", "unexpected/topic__sink.csv")


def run(scn: Scenario, out: Path, *spark: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "kafka-recon"), "run", "--config", str(scn.config),
         "--flow", "f", "--start", START.isoformat(), "--end", END.isoformat(), "--out",
         str(out), *spark], capture_output=True, text=True, timeout=900, check=False,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable})


def answer(out: Path) -> dict[str, object]:
    """What a run found, without the run folder's own path or the run that wrote it."""
    found = json.loads((out / "reconcile.json").read_text().replace(str(out), "OUT"))
    found.pop("run", None)
    return {"reconcile": found, "result": json.loads((out / "result.json").read_text())["status"],
            **{f: (out / f).read_text() for f in ID_FILES}}


def test_runs_through_one_spark_connect_server_find_every_lost_and_extra_record(
        kafka: KafkaCluster, spark_connect: SparkConnect, tmp_path: Path) -> None:
    """The same answer as a run's own Spark (the bench compares the two on a million records,
    every id file): here against what the scenario did, twice on one server."""
    scn = Scenario(tmp_path, kafka.bootstrap)
    rows = scn.flow_through(80, sink_lacks={7, 42})
    scn.produce([(5, rows[5]), (6, rows[6])])  # two copies more in the topic
    scn.upstream({201: at(30), 202: at(31)})  # never written to the topic
    # two runs, one server: the second's session starts clean of the first's
    done = [run(scn, tmp_path / f"remote{i}", "--remote", spark_connect.url) for i in (1, 2)]
    for d in done:
        assert d.returncode == 1, d.stderr[-3000:]
    first = answer(tmp_path / "remote1")
    assert sorted(str(first["missing/topic__sink.csv"]).split()) == ["42", "7", "id"]
    assert sorted(str(first["missing/db__topic.csv"]).split()) == ["201", "202", "id"]
    assert sorted(str(first["duplicate/db__topic.csv"]).split()) == ["5,1", "6,1", "id,extra"]
    assert first["unexpected/topic__sink.csv"] == "id\n"
    tiers = first["reconcile"]["tiers"]  # type: ignore[index]
    assert [(t["count"], t["distinct"]) for t in tiers] == [(82, 82), (82, 80), (78, 78)]
    assert answer(tmp_path / "remote2") == first
    # Spark Connect tells its sessions nothing of jobs: not counted rather than 0
    assert RunFolder(tmp_path / "remote1").read(Timings, "stage").spark_jobs is None


def test_a_server_that_cannot_be_reached_leaves_an_inconclusive_run_naming_it(
        kafka: KafkaCluster, tmp_path: Path) -> None:
    scn = Scenario(tmp_path, kafka.bootstrap)
    scn.flow_through(10)
    url = f"sc://{HOST}:{free_port()}"  # nothing listens there
    done = run(scn, tmp_path / "out", "--remote", url)
    assert done.returncode == 2
    assert f"Spark Connect server {url}: cannot be used" in done.stderr
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["status"] == "inconclusive"


def test_a_server_whose_jvms_are_not_on_utc_is_refused_before_it_counts_anything(
        kafka: KafkaCluster, tmp_path: Path) -> None:
    """JDBC reads naive database timestamps in the JVM's own zone: a server off UTC would put
    records in the wrong buckets, or outside the window, without a word."""
    scn = Scenario(tmp_path, kafka.bootstrap)
    scn.flow_through(10)
    plain = [str(spark_submit()), "--class", SERVER_CLASS, "--master", "local[1]",
             "--jars", ",".join(spark_jars())]  # Spark's defaults: no -Duser.timezone=UTC
    with SparkConnect(tmp_path / "connect", argv=plain) as server:
        done = run(scn, tmp_path / "out", "--remote", server.url)
    assert done.returncode == 2
    assert "its JVMs are not on UTC (spark.driver.extraJavaOptions lacks " \
           "-Duser.timezone=UTC)" in done.stderr
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["status"] == "inconclusive"
    assert not (tmp_path / "out" / "reconcile.json").exists()
