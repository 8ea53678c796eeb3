"""Every shipped Prometheus rule, evaluated by the real Prometheus (Debian's) over kafka-recon's
own metrics: a history store holding one flow per case, served as /recon/metrics serves it.

- a loss beyond its tolerance pages (KafkaReconMissingRecords), one within it does not;
- duplicates beyond their tolerance open a ticket (KafkaReconToleranceExceeded);
- an inconclusive window opens a ticket (KafkaReconInconclusive);
- staleness follows each flow's window: a 5-minute flow silent for an hour is stale, a daily
  flow whose newest window ended three hours ago is not (KafkaReconStale).
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from harness.services.prometheus import Prometheus
from kafka_recon.outputs import history
from kafka_recon.settings import REPO_ROOT
from tests.factories import finding, hop, result, tier

pytestmark = pytest.mark.integration

TIERS = """    record: {{id: "$.id", event_time: "$.ts"}}
    tiers:
      - {{name: db, type: sql, conn: "sqlite:///x.db",
         ids: "SELECT id, ts AS event_time FROM s WHERE ts >= :start AND ts < :end"}}
      - {{name: topic, type: kafka, bootstrap: "127.0.0.1:9", topic: {name}}}
"""
FLOWS = {"lossy": "1d", "tolerated": "1d", "doubled": "1d", "unsure": "1d",
         "fast_stale": "5m", "daily_fresh": "1d"}
HOP = "db->topic"


def _result(name: str, end: datetime, **kw: Any) -> Any:
    """A window of `name` ending at `end`: 1,000 records expected on its one hop."""
    missing, duplicate = kw.pop("missing", 0), kw.pop("duplicate", 0)
    return result(name, end - timedelta(days=1), tiers=[tier("db", 1000), tier("topic", 1000)],
                  hops=[hop("db", "topic", "write", 1000, 1000 - missing + duplicate,
                            missing=missing, duplicate=duplicate,
                            buckets=[{"bucket": (end - timedelta(days=1)).strftime(
                                "%Y-%m-%dT%H:%M:%SZ"), "expected": 1000,
                                "observed": 1000 - missing + duplicate, "missing": missing,
                                "duplicate": duplicate}])],
                  **kw)


@pytest.fixture(scope="module")
def metrics_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    work = tmp_path_factory.mktemp("rules")
    config = work / "flows.yaml"
    config.write_text("flows:\n" + "".join(
        f"  {n}:\n    owners: [a@example.com]\n    window: {w}\n" + TIERS.format(name=n)
        for n, w in FLOWS.items()))
    eng = history.engine(f"sqlite:///{work / 'history.db'}")
    now = datetime.now(UTC)
    recent = now - timedelta(hours=3)
    history.record(_result("lossy", recent, missing=30, findings=[
        finding("loss", "write", HOP, 30, allowed=10)]), str(work), eng=eng)
    history.record(_result("tolerated", recent, missing=3, findings=[
        finding("loss", "write", HOP, 3, within_tolerance=True, allowed=10)]), str(work),
        eng=eng)
    history.record(_result("doubled", recent, duplicate=7, findings=[
        finding("duplicate", "write", HOP, 7, allowed=0)]), str(work), eng=eng)
    history.record(_result("unsure", recent, reasons=["a source could not be read"]),
                   str(work), eng=eng)
    history.record(_result("fast_stale", now - timedelta(hours=1)), str(work), eng=eng)
    history.record(_result("daily_fresh", recent), str(work), eng=eng)

    from kafka_recon.outputs.metrics import CONTENT_TYPE, exposition

    class Metrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the handler's name)
            body = exposition(eng)
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    import os

    os.environ["KAFKA_RECON_CONFIG"] = str(config)  # the window lengths come from the config
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        os.environ.pop("KAFKA_RECON_CONFIG", None)


def test_every_shipped_rule_fires_for_its_case_and_only_for_it(
        metrics_url: str, tmp_path: Path) -> None:
    rules = REPO_ROOT / "config" / "prometheus" / "kafka_recon_rules.yml"
    with Prometheus(tmp_path / "prometheus",
                    [{"job": "kafka-recon", "address": metrics_url, "path": "/metrics"}],
                    [rules]) as prom:
        want = {("KafkaReconMissingRecords", "lossy"), ("KafkaReconToleranceExceeded", "doubled"),
                ("KafkaReconInconclusive", "unsure"), ("KafkaReconStale", "fast_stale")}
        deadline = time.monotonic() + 60
        while True:
            firing = {(a["labels"]["alertname"], a["labels"]["flow"]): a for a in prom.alerts()
                      if a["state"] == "firing"}
            if set(firing) >= want or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert set(firing) == want, (sorted(firing), prom.targets_health())
        lossy = firing["KafkaReconMissingRecords", "lossy"]
        assert lossy["annotations"]["summary"] == (
            "lossy: 30 record(s) missing on db->topic (write side), beyond its tolerance")
        assert firing["KafkaReconToleranceExceeded", "doubled"]["labels"]["kind"] == "duplicate"
        # one staleness rule, two window lengths: the metrics it reads
        [fast] = prom.query('kafka_recon_window_seconds{flow="fast_stale"}')
        [daily] = prom.query('kafka_recon_window_seconds{flow="daily_fresh"}')
        assert (fast["value"], daily["value"]) == (300, 86400)
        [total] = prom.query('flow:kafka_recon_missing_records:sum{flow="tolerated"}')
        assert total["value"] == 3, "a loss within tolerance is still counted, not paged"
