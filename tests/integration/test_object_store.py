"""Run folders in an object store (`KAFKA_RECON_OUT=s3://<conn>@bucket/prefix`), on a real
S3-compatible server (s3proxy, its filesystem backend): the driver writes through s3fs, Spark's
executors through Hadoop's S3A connector, and nothing of the run lands on this host's disk.
The store stopping mid-run ends the run inconclusive, naming the store."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.services.kafka import KafkaCluster
from harness.services.postgres import PostgresServer
from harness.services.s3 import S3Server
from tests.integration.engine_harness import END, START, Scenario

pytestmark = pytest.mark.integration

CLI = str(Path(sys.executable).parent / "kafka-recon")
BUCKET = "recon-runs"


@pytest.fixture
def s3(tmp_path: Path) -> Iterator[S3Server]:
    server = S3Server(tmp_path / "s3").start()
    server.make_bucket(BUCKET)
    yield server
    server.stop()


def env(s3: S3Server, tmp_path: Path) -> dict[str, str]:
    """The runs root in the bucket through the Airflow connection `recon_s3` (JSON form); the
    store (leases) in a database, as a runs root in an object store requires."""
    return {**os.environ, "PYSPARK_PYTHON": sys.executable,
            "KAFKA_RECON_OUT": f"s3://recon_s3@{BUCKET}/runs",
            "AIRFLOW_CONN_RECON_S3": s3.connection(),
            "KAFKA_RECON_STORE": f"sqlite:///{tmp_path / 'store.db'}"}


def start_run(scn: Scenario, out: str, environ: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([CLI, "run", "--config", str(scn.config), "--flow", "f",
                             "--start", START.isoformat(), "--end", END.isoformat(),
                             "--out", out], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=environ)


def test_a_run_in_an_object_store_writes_every_file_there_and_is_exact(
        kafka: KafkaCluster, s3: S3Server, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    scn = Scenario(tmp_path, kafka.bootstrap)
    scn.flow_through(40, sink_lacks={13, 27})
    # the replay's records kept: Spark writes them to the bucket as Parquet too
    environ = {**env(s3, tmp_path), "KAFKA_RECON_KEEP_REPLAYS": "1"}
    out = f"s3://recon_s3@{BUCKET}/runs/f/w1"
    proc = start_run(scn, out, environ)
    stdout, stderr = proc.communicate(timeout=900)
    assert proc.returncode == 1, stderr[-3000:]
    assert "2 record(s) lost on the consume side (topic->sink)" in stdout
    assert f"result: s3://{BUCKET}/runs/f/w1/result.json" in stdout

    # every file in the bucket, the id files written by Spark's executors through S3A
    folder = s3.data / BUCKET / "runs" / "f" / "w1"
    assert (folder / "missing" / "topic__sink.csv").read_text() == "id\n13\n27\n"
    result = json.loads((folder / "result.json").read_text())
    assert result["status"] == "findings"
    hop = next(h for h in result["hops"] if (h["from"], h["to"]) == ("topic", "sink"))
    assert hop["missing_ids"] == "missing/topic__sink.csv"  # relative to the run folder
    assert any((folder / "replays").rglob("*.parquet")), "the kept replay is Parquet in S3"
    assert {p.name for p in (folder / "steps").iterdir()} >= {"stage.json", "replay.json",
                                                             "reconcile.json"}
    assert "topic__sink.csv" in (folder / "report.html").read_text()
    assert not list(folder.rglob(".ids.parts*")), "Spark's scratch is gone"
    assert not (tmp_path / "runs").exists() and not Path("runs/f").exists()

    # validation, mail and the page read the same folder from the store
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    from kafka_recon.config import load_flow
    from kafka_recon.outputs.notify import build_message
    from kafka_recon.outputs.validate import validate_result
    from kafka_recon.result.model import Result
    from kafka_recon.runfolder import RunFolder
    from kafka_recon.stores.objects import at

    run = RunFolder(at(out))
    flow = load_flow(scn.config, "f")
    validation = validate_result(Result.load(run.result), run, flow.tolerance)
    assert not validation.success and validation.data_docs is not None
    assert validation.data_docs.startswith(f"s3://{BUCKET}/runs/f/w1/gx/")
    assert (folder / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html").is_file()
    mail = build_message(Result.load(run.result), run, ["owner@example.com"], "recon@example.com")
    attached = {p.get_filename(): p.get_content() for p in mail.iter_attachments()}
    assert attached == {"topic__sink.csv": "id\n13\n27\n"}
    served = run.servable("report.html")
    assert served is not None and b"topic__sink.csv" in served.read_bytes()
    assert run.servable("gx/uncommitted/data_docs/local_site") is not None
    assert run.servable("result.json") is None and run.servable("../w1/result.json") is None


def test_the_object_store_stopping_mid_run_ends_it_inconclusive_naming_the_store(
        kafka: KafkaCluster, s3: S3Server, tmp_path: Path) -> None:
    scn = Scenario(tmp_path, kafka.bootstrap)
    scn.flow_through(20)
    proc = start_run(scn, f"s3://recon_s3@{BUCKET}/runs/f/w2", env(s3, tmp_path))
    steps = s3.data / BUCKET / "runs" / "f" / "w2" / "steps"
    _begun(proc, steps)
    s3.kill()
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 2, (stdout, stderr)
    store = f"the object store at s3://{BUCKET} ({s3.endpoint}) did not answer"
    assert f"INCONCLUSIVE - {store}" in stdout
    assert stderr.strip().splitlines()[-1].startswith(f"kafka-recon: {store}"), stderr
    assert "Traceback" not in stderr
    # nothing in the bucket reads as an answer: no result was written
    assert not (steps.parent / "result.json").exists()


def _begun(proc: subprocess.Popen[str], steps: Path) -> None:
    """Until the run has journalled its first step in the bucket."""
    deadline = time.monotonic() + 120
    while not (steps.is_dir() and any(steps.iterdir())):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)


def test_kafka_recons_store_stopping_mid_run_ends_it_inconclusive_naming_it(
        kafka: KafkaCluster, s3: S3Server, tmp_path: Path) -> None:
    """The store holds the window's lease: a run that cannot confirm it still holds the window
    cannot vouch that no other run wrote it meanwhile."""
    base = Path(tempfile.mkdtemp(prefix="kafka-recon-pg-midrun-"))
    pg = PostgresServer(base).start()
    try:
        store = pg.create_database("recon_store")
        scn = Scenario(tmp_path, kafka.bootstrap)
        scn.flow_through(20)
        environ = {**env(s3, tmp_path), "KAFKA_RECON_STORE": store,
                   "KAFKA_RECON_LEASE_SECONDS": "10"}
        proc = start_run(scn, f"s3://recon_s3@{BUCKET}/runs/f/w3", environ)
        folder = s3.data / BUCKET / "runs" / "f" / "w3"
        _begun(proc, folder / "steps")
        pg.stop()
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        pg.stop()
        shutil.rmtree(base, ignore_errors=True)
    named = f"kafka-recon's store (postgresql at 127.0.0.1:{pg.port}/recon_store) did not answer"
    assert proc.returncode == 2, (stdout, stderr)
    assert "INCONCLUSIVE - " in stdout and named in stdout, stdout
    assert "Traceback" not in stderr
    result = json.loads((folder / "result.json").read_text())
    assert result["status"] == "inconclusive" and any(named in r for r in result["reasons"])


def test_a_run_given_an_object_store_by_out_alone_writes_there_and_is_exact(
        kafka: KafkaCluster, s3: S3Server, tmp_path: Path) -> None:
    """`--out s3://...` with the runs root left local, as `kafka-recon run --help` offers it:
    Spark gets S3A because the run folder is in S3, whatever the runs root setting says."""
    scn = Scenario(tmp_path, kafka.bootstrap)
    scn.flow_through(20, sink_lacks={5})
    environ = {k: v for k, v in env(s3, tmp_path).items() if k != "KAFKA_RECON_OUT"}
    environ["KAFKA_RECON_HOME"] = str(tmp_path / "home")  # its runs root: a local folder
    proc = start_run(scn, f"s3://recon_s3@{BUCKET}/adhoc/f/w4", environ)
    stdout, stderr = proc.communicate(timeout=900)
    assert proc.returncode == 1, stderr[-3000:]
    assert "1 record(s) lost on the consume side (topic->sink)" in stdout
    folder = s3.data / BUCKET / "adhoc" / "f" / "w4"
    assert (folder / "missing" / "topic__sink.csv").read_text() == "id\n5\n"
    assert json.loads((folder / "result.json").read_text())["status"] == "findings"


def test_an_object_store_that_does_not_answer_at_begin_says_so_in_one_line(
        kafka: KafkaCluster, s3: S3Server, tmp_path: Path) -> None:
    scn = Scenario(tmp_path, kafka.bootstrap)
    scn.flow_through(5)
    s3.kill()
    environ = {k: v for k, v in env(s3, tmp_path).items() if k != "KAFKA_RECON_OUT"}
    proc = start_run(scn, f"s3://recon_s3@{BUCKET}/adhoc/f/w5", environ)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 2, (stdout, stderr)
    store = f"the object store at s3://{BUCKET} ({s3.endpoint}) did not answer"
    assert f"INCONCLUSIVE - {store}" in stdout
    assert stderr.strip().splitlines()[-1].startswith(f"kafka-recon: {store}"), stderr
    assert "Traceback" not in stderr


def test_an_object_store_that_stops_during_the_reconcile_ends_the_run_inconclusive(
        kafka: KafkaCluster, s3: S3Server, tmp_path: Path) -> None:
    scn = Scenario(tmp_path, kafka.bootstrap)
    scn.flow_through(20, sink_lacks={5})
    proc = start_run(scn, f"s3://recon_s3@{BUCKET}/runs/f/w6", env(s3, tmp_path))
    steps = s3.data / BUCKET / "runs" / "f" / "w6" / "steps"
    deadline = time.monotonic() + 300
    while not (steps / "reconcile.json").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    s3.kill()
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 2, (stdout, stderr)
    store = f"the object store at s3://{BUCKET} ({s3.endpoint}) did not answer"
    assert f"INCONCLUSIVE - {store}" in stdout, stdout
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"kafka-recon: {store}") and len(last) < 400, last
    assert "Traceback" not in stderr
    assert not (steps.parent / "result.json").exists()
