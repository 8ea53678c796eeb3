"""A Flume tier counted from snapshots of recorded agent metrics, across an agent restart.

The agent's HTTP JSON metrics are served by a small HTTP server replaying recorded responses
(the real agent runs in the drill); the topic, the databases and Spark are real.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from harness.services.kafka import KafkaCluster
from kafka_recon import orchestrate
from kafka_recon.config import load_flows
from tests.integration.engine_harness import END, START, Scenario, at, findings
from tests.report_lines import meaningless

pytestmark = pytest.mark.integration


def take_snapshots(flows: dict[str, Any], now: datetime) -> None:
    """What the snapshots DAG does for the Flume tiers, at a chosen time."""
    from kafka_recon.cluster.snapshots import take_flume
    from kafka_recon.stores.snapshots import connect

    for flow in flows.values():
        take_flume(connect(), flow, now)

RECORDED = json.loads((Path(__file__).parent / "data" / "flume_metrics.json").read_text())


class Agent:
    """Serves the recorded responses; `step()` moves to the next one."""

    def __init__(self) -> None:
        self.index = 0
        agent = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                body = json.dumps(RECORDED["responses"][agent.index]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def step(self) -> None:
        self.index += 1


@pytest.fixture
def agent() -> Iterator[Agent]:
    a = Agent()
    yield a
    a.server.shutdown()


def with_flume(scn: Scenario, url: str) -> None:
    text = scn.config.read_text().replace("      - name: topic", f"""      - name: collector
        type: flume
        metrics_url: "{url}"
        source: r1
        sink: k1
      - name: topic""").replace("bucket: 1h", "bucket: 1d")
    scn.config.write_text(text)


def test_flume_channel_loss_is_located_inside_the_agent_across_a_restart(
        kafka: KafkaCluster, tmp_path: Path, spark: Any, agent: Agent,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_RECON_SNAPSHOTS", str(tmp_path / "flume.db"))
    scn = Scenario(tmp_path, kafka.bootstrap)
    with_flume(scn, agent.url)
    rows = {i: at(i * 5) for i in range(1, 101)}
    lost_in_channel = {56, 57, 58, 59, 60}
    scn.upstream(rows)
    delivered = [(i, t) for i, t in rows.items() if i not in lost_in_channel]
    scn.produce(delivered)
    scn.sink(delivered)
    flows = load_flows(scn.config)
    # snapshots interval by interval: each counts in the window in which it ends, so the last
    # one, taken as the window ends, closes it (one a minute later would be the next day's)
    for when in (START - timedelta(minutes=1), START + timedelta(hours=6),
                 START + timedelta(hours=12), END):
        take_snapshots(flows, now=when)
        agent.step() if agent.index < len(RECORDED["responses"]) - 1 else None
    r = scn.reconcile(spark)
    assert findings(r) == [("loss", "write", "collector.source->collector.sink", 5)]
    assert r["status"] == "findings"
    (loss,) = [f for f in r["findings"] if f["kind"] == "loss"]
    assert scn.ids(loss["ids"]) == lost_in_channel, "the id tiers around the agent name them"
    by_name = {t["name"]: t["count"] for t in r["tiers"]}
    assert by_name == {"db": 100, "collector.source": 100, "collector.sink": 95, "topic": 95,
                       "sink": 95}, "the restart is not read as negative traffic"
    # its report, validated: every line says something of this flow's tiers
    run = orchestrate.load("f", START.isoformat(), END.isoformat(), scn.config, scn.out)
    orchestrate.validate(run)
    orchestrate.report(run)
    assert meaningless(scn.out) == []
    assert "collector.source->collector.sink: 5 records missing, 0 allowed" in \
        (scn.out / "report.txt").read_text()


def test_a_missing_snapshot_makes_the_run_inconclusive(
        kafka: KafkaCluster, tmp_path: Path, spark: Any, agent: Agent,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_RECON_SNAPSHOTS", str(tmp_path / "flume.db"))
    scn = Scenario(tmp_path, kafka.bootstrap)
    with_flume(scn, agent.url)
    scn.upstream({1: at(1)})
    scn.produce([(1, at(1))])
    scn.sink([(1, at(1))])
    take_snapshots(load_flows(scn.config), now=START - timedelta(minutes=1))  # none after END
    r = scn.reconcile(spark)
    assert r["status"] == "inconclusive"
    assert any("no Flume snapshot brackets" in reason for reason in r["reasons"])
