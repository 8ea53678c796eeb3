"""`kafka-recon run`: exit codes, idempotent output, and a clear error for each bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from harness.services.kafka import KafkaCluster
from harness.services.ports import free_port
from tests.integration.engine_harness import END, START, Scenario, at

pytestmark = pytest.mark.integration

CLI = str(Path(sys.executable).parent / "kafka-recon")


def run(config: Path, out: Path, start: datetime = START, end: datetime = END,
        flow: str = "f") -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, "run", "--config", str(config), "--flow", flow,
                           "--start", start.isoformat(), "--end", end.isoformat(),
                           "--out", str(out)],
                          capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable})


def test_findings_exit_1_and_a_rerun_replaces_the_output(kafka: KafkaCluster,
                                                         tmp_path: Path) -> None:
    scn = Scenario(tmp_path, kafka.bootstrap)
    rows = {i: at(i) for i in range(1, 41)}
    scn.upstream(rows)
    scn.produce(list(rows.items()))
    scn.sink([(i, t) for i, t in rows.items() if i != 13])
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
    rows = {i: at(i) for i in range(1, 11)}
    scn.upstream(rows)
    scn.produce(list(rows.items()))
    scn.sink(list(rows.items()))
    done = run(scn.config, tmp_path / "out")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "OK - every record accounted for" in done.stdout


def bad(tmp_path: Path, config_text: str | None = None, **kw: object) -> str:
    config = tmp_path / "bad.yaml"
    if config_text is not None:
        config.write_text(config_text)
    done = run(config, tmp_path / "out", **kw)  # type: ignore[arg-type]
    assert done.returncode == 2, (done.stdout, done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    return done.stderr.strip()


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


def test_unreachable_broker_names_host_and_port(good: Scenario, tmp_path: Path) -> None:
    port = free_port()
    text = good.config.read_text().replace(good.bootstrap, f"127.0.0.1:{port}")
    assert f"kafka at 127.0.0.1:{port} cannot be reached" in bad(tmp_path, text)


def test_missing_topic(good: Scenario, tmp_path: Path) -> None:
    text = good.config.read_text().replace(good.topic, "no-such-topic")
    assert "topic 'no-such-topic' does not exist on kafka at" in bad(tmp_path, text)


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
