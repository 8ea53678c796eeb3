"""`kafka-recon run`: exit codes, idempotent output, and a clear error for each bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from harness.services.kafka import KafkaCluster
from harness.services.ports import free_port
from tests.integration.engine_harness import END, START, Scenario, at

pytestmark = pytest.mark.integration

CLI = str(Path(sys.executable).parent / "kafka-recon")


def run(config: Path, out: Path, start: datetime = START, end: datetime = END,
        flow: str = "f", env: dict[str, str] | None = None, args: tuple[str, ...] = ()
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, "run", "--config", str(config), "--flow", flow,
                           "--start", start.isoformat(), "--end", end.isoformat(),
                           "--out", str(out), *args],
                          capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable, **(env or {})})


def test_findings_exit_1_and_a_rerun_replaces_the_output(kafka: KafkaCluster,
                                                         tmp_path: Path) -> None:
    scn = Scenario(tmp_path, kafka.bootstrap)
    scn.flow_through(40, sink_lacks={13})
    out = tmp_path / "out"
    first = run(scn.config, out)
    assert first.returncode == 1, first.stderr[-3000:]
    assert "1 record(s) lost on the consume side (topic->sink)" in first.stdout
    stale = out / "missing" / "stale.csv"
    stale.write_text("id\n999\n")
    snapshot = (out / "missing" / "topic__sink.csv").read_text()
    second = run(scn.config, out)
    assert second.returncode == 1
    assert not stale.exists(), "a re-run replaces the window's id files"
    assert (out / "missing" / "topic__sink.csv").read_text() == snapshot == "id\n13\n"


def test_clean_window_exits_0(kafka: KafkaCluster, tmp_path: Path) -> None:
    scn = Scenario(tmp_path, kafka.bootstrap)
    scn.flow_through(10)
    done = run(scn.config, tmp_path / "out")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "OK - every record accounted for" in done.stdout


def bad(tmp_path: Path, config_text: str | None = None, **kw: object) -> str:
    """Exit 2, no traceback, and one line on stderr saying what and where."""
    config = tmp_path / "bad.yaml"
    if config_text is not None:
        config.write_text(config_text)
    done = run(config, tmp_path / "out", **kw)  # type: ignore[arg-type]
    assert done.returncode == 2, (done.stdout, done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("kafka-recon")]
    assert len(lines) == 1, done.stderr[-2000:]
    return done.stderr.strip()


def inconclusive(out: Path) -> str:
    """The run folder's result is inconclusive; its one reason."""
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "inconclusive", result
    [reason] = result["reasons"]
    return str(reason)


@pytest.fixture
def good(kafka: KafkaCluster, tmp_path: Path) -> Scenario:
    scn = Scenario(tmp_path, kafka.bootstrap)
    scn.upstream({1: at(1)})
    return scn


def test_malformed_yaml(tmp_path: Path) -> None:
    assert "not valid YAML" in bad(tmp_path, "flows: {f: [\n")


def test_unknown_field(good: Scenario, tmp_path: Path) -> None:
    text = good.config.read_text().replace("replays: 2", "replays: 2\n    colour: red")
    msg = bad(tmp_path, text)
    assert "flow 'f', field 'colour': Extra inputs are not permitted" in msg


def test_end_not_after_start(good: Scenario) -> None:
    done = run(good.config, good.tmp / "out", start=END, end=START)
    assert done.returncode == 2 and "is not after its start" in done.stderr


def test_window_in_the_future(good: Scenario) -> None:
    later = datetime.now(UTC) + timedelta(days=2)
    done = run(good.config, good.tmp / "out", start=later, end=later + timedelta(days=1))
    assert done.returncode == 2 and "the window starts in the future" in done.stderr


def test_bad_jvm_options_exit_2_before_anything_is_written(good: Scenario) -> None:
    out = good.tmp / "out"
    done = run(good.config, out, env={"KAFKA_RECON_JVM_OPTIONS": "-Xss4m UseG1GC"})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "KAFKA_RECON_JVM_OPTIONS='-Xss4m UseG1GC': 'UseG1GC' is not a JVM option" \
        in done.stderr
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize(("args", "env", "message"), [
    (("--master", "local[1]", "--remote", "sc://127.0.0.1:15002"), {},
     "--master and --remote: a run uses its own Spark or a Spark Connect server's, not both"),
    ((), {"KAFKA_RECON_SPARK_REMOTE": "127.0.0.1:15002"},
     "KAFKA_RECON_SPARK_REMOTE='127.0.0.1:15002': expected a Spark Connect URL")])
def test_a_spark_that_cannot_be_asked_for_exits_2_before_anything_is_written(
        good: Scenario, args: tuple[str, ...], env: dict[str, str], message: str) -> None:
    out = good.tmp / "out"
    done = run(good.config, out, args=args, env=env)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert message in done.stderr
    assert not out.exists() or not any(out.iterdir())


def test_unreachable_broker_names_host_and_port(good: Scenario, tmp_path: Path) -> None:
    port = free_port()
    text = good.config.read_text().replace(good.bootstrap, f"127.0.0.1:{port}")
    assert f"kafka at 127.0.0.1:{port} cannot be reached" in bad(tmp_path, text)


def test_missing_topic(good: Scenario, tmp_path: Path) -> None:
    text = good.config.read_text().replace(good.topic, "no-such-topic")
    assert "topic 'no-such-topic' does not exist on the cluster (kafka at" in bad(tmp_path, text)


def test_unreachable_database_names_host_and_port(good: Scenario, tmp_path: Path) -> None:
    port = free_port()
    text = good.config.read_text().replace(f"sqlite:///{good.down}",
                                           f"postgresql://u:p@127.0.0.1:{port}/sink")
    msg = bad(tmp_path, text)
    assert f"tier 'sink' (postgresql at 127.0.0.1:{port}/sink)" in msg
    # the run folder still says why, so a report and a mail can carry it
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["status"] == "inconclusive"
    assert f"127.0.0.1:{port}" in result["reasons"][0]


def test_missing_sqlite_file(good: Scenario, tmp_path: Path) -> None:
    text = good.config.read_text().replace(str(good.down), str(tmp_path / "nope.db"))
    assert f"tier 'sink': sqlite file {tmp_path / 'nope.db'} does not exist" in bad(tmp_path, text)


def test_query_without_window_parameters(good: Scenario, tmp_path: Path) -> None:
    window = "WHERE ts >= :start AND ts < :end\"\n      - name: topic"
    text = good.config.read_text().replace(window, "\"\n      - name: topic")
    assert "must use both :start and :end" in bad(tmp_path, text)


def test_query_without_id_column(good: Scenario, tmp_path: Path) -> None:
    text = good.config.read_text().replace("SELECT id, ts AS event_time FROM src",
                                           "SELECT id AS order_id, ts AS event_time FROM src")
    msg = bad(tmp_path, text)
    assert "tier 'db': the 'ids' query returns columns ['order_id', 'event_time']" in msg
    assert "(missing id)" in msg


# ------------------------------------------------------------------ the one failure policy
def test_missing_jars_exit_2_naming_the_folder_before_anything_is_written(
        good: Scenario, tmp_path: Path) -> None:
    empty = tmp_path / "no-jars"
    empty.mkdir()
    msg = bad(tmp_path, good.config.read_text(), env={"KAFKA_RECON_SPARK_JARS": str(empty)})
    assert f"no kafka-recon-reader.jar in {empty}: the wheel ships it" in msg
    assert not (tmp_path / "out" / "result.json").exists()


def test_a_malformed_client_properties_file_exit_2_naming_file_and_line(
        good: Scenario, tmp_path: Path) -> None:
    props = tmp_path / "producer.properties"
    props.write_text("acks=all\njust words\n")
    text = good.config.read_text().replace(
        "consumer_groups: []", f"consumer_groups: []\n        producer_properties: {props}")
    assert f"client properties file {props}, line 2: expected key=value" in bad(tmp_path, text)


@pytest.mark.parametrize(("url", "says"), [
    ("postgresql://u:secret@127.0.0.1:notaport/sink", "not a database URL"),
    ("mssql://u:secret@127.0.0.1/sink", "no driver is bundled for 'mssql'"),
])
def test_a_database_url_that_cannot_be_used_is_an_inconclusive_run_naming_the_tier(
        good: Scenario, tmp_path: Path, url: str, says: str) -> None:
    text = good.config.read_text().replace(f"sqlite:///{good.down}", url)
    msg = bad(tmp_path, text)
    assert "tier 'sink'" in msg and says in msg
    assert "secret" not in msg, "a password never reaches a message"
    reason = inconclusive(tmp_path / "out")
    assert "tier 'sink'" in reason and says in reason and "secret" not in reason


def test_a_json_form_airflow_connection_is_read_outside_airflow(kafka: KafkaCluster,
                                                                tmp_path: Path) -> None:
    scn = Scenario(tmp_path, kafka.bootstrap)
    scn.flow_through(5)
    scn.config.write_text(scn.config.read_text().replace(f"sqlite:///{scn.down}", "sink_json"))
    conn = json.dumps({"conn_type": "sqlite", "host": str(scn.down)})
    done = run(scn.config, tmp_path / "out", env={"AIRFLOW_CONN_SINK_JSON": conn})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "OK - every record accounted for" in done.stdout


def test_a_malformed_json_connection_is_an_inconclusive_run_naming_it(good: Scenario,
                                                                       tmp_path: Path) -> None:
    text = good.config.read_text().replace(f"sqlite:///{good.down}", "sink_json")
    msg = bad(tmp_path, text, env={"AIRFLOW_CONN_SINK_JSON": '{"conn_type": "sqlite",'})
    assert "connection 'sink_json': AIRFLOW_CONN_SINK_JSON is not valid JSON" in msg
    assert "connection 'sink_json'" in inconclusive(tmp_path / "out")


def test_a_spark_failure_exits_2_with_one_line_and_an_inconclusive_result_naming_the_step(
        good: Scenario, tmp_path: Path) -> None:
    msg = bad(tmp_path, good.config.read_text(), args=("--master", "bogus://nowhere"))
    # Spark's own lines above it say why ("Could not parse Master URL"); ours names the step
    assert "kafka-recon: step 'replay' failed: PySparkRuntimeError" in msg
    assert "the 'replay' step failed: PySparkRuntimeError" in inconclusive(tmp_path / "out")
    assert (tmp_path / "out" / "report.html").exists(), "the report says why, too"


# ------------------------------------------------------------------ windows and runs
def test_a_window_end_far_in_the_future_is_refused_with_the_bound(good: Scenario,
                                                                    tmp_path: Path) -> None:
    msg = bad(tmp_path, good.config.read_text(), end=datetime(9999, 12, 31, tzinfo=UTC))
    assert "window end 9999-12-31T00:00:00+00:00 is outside 1970-01-01T00:00:00Z.." in msg


def test_two_runs_of_one_window_never_interleave(kafka: KafkaCluster, tmp_path: Path) -> None:
    scn = Scenario(tmp_path, kafka.bootstrap)
    scn.flow_through(30, sink_lacks={4})
    out = tmp_path / "out"
    first = subprocess.Popen(
        [CLI, "run", "--config", str(scn.config), "--flow", "f", "--start", START.isoformat(),
         "--end", END.isoformat(), "--out", str(out)], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    try:
        import time

        deadline = time.monotonic() + 120
        # the first run has journalled a step: it holds the window
        while not (out / "steps").is_dir() or not any((out / "steps").iterdir()):
            assert time.monotonic() < deadline, "the first run never began"
            time.sleep(0.2)
        second = run(scn.config, out)
        assert second.returncode == 2, second.stderr[-2000:]
        assert "another run of this window is under way (process " in second.stderr
        stdout, stderr = first.communicate(timeout=600)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 1, stderr[-3000:]
    assert "1 record(s) lost on the consume side (topic->sink)" in stdout
    result = json.loads((out / "result.json").read_text())
    assert [f["count"] for f in result["findings"] if f["kind"] == "loss"] == [1]
    # once the first is done the window is free again: tests/unit/test_runfolder.py


def test_a_rerun_with_fewer_replays_leaves_nothing_of_the_earlier_run(
        kafka: KafkaCluster, tmp_path: Path, spark: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_recon import orchestrate

    scn = Scenario(tmp_path, kafka.bootstrap)
    scn.flow_through(10)
    out = tmp_path / "out"
    for replays, keep in ((3, "1"), (1, "0")):
        monkeypatch.setenv("KAFKA_RECON_KEEP_REPLAYS", keep)
        recon = orchestrate.load("f", START.isoformat(), END.isoformat(), scn.config, out)
        result = orchestrate.execute(recon, spark, replays)  # as the command line runs it
        assert result.status == "ok"
        if keep == "1":  # only the first replay's records are ever kept, and only when asked
            assert sorted(str(p.relative_to(out / "replays"))
                          for p in (out / "replays").glob("*/*")) == ["topic/r1"]
    assert not (out / "replays").exists()  # the kept records of the earlier run are gone
    assert len(json.loads((out / "result.json").read_text())["replays"]) == 1
