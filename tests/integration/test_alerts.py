"""A flow's Slack and PagerDuty alerts, sent by Airflow's own notifiers over real HTTP.

Slack and PagerDuty cannot be reached from here: a recorder on loopback stands in for both
(`harness.services.http_recorder`). Slack's webhook connection points at it; PagerDuty's
Events API client, whose address is fixed (https://events.pagerduty.com), reaches it unchanged
through HTTPS_PROXY, the recorder terminating TLS with a certificate the test's CA signed. The
payloads asserted are what those services would have received.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from harness.services.http_recorder import PAGERDUTY_ACCEPTED, HttpRecorder
from kafka_recon import orchestrate
from kafka_recon.outputs import history
from kafka_recon.result.model import Cause
from kafka_recon.runfiles.outcomes import Alerts
from tests.factories import finding, hop, result, tier

pytestmark = pytest.mark.integration

DAY = datetime(2026, 11, 20, tzinfo=UTC)
SLACK_PATH = "/services/T0/B0/XYZ"
ROUTING_KEY = "R0UT1NGKEY0000000000000000000000"

CONFIG = """
flows:
  orders:
    owners: [orders-team@example.com]
    record: {{id: "$.id", event_time: "$.ts"}}
    tiers:
      - {{name: topic, type: kafka, bootstrap: "127.0.0.1:9", topic: orders}}
      - {{name: sink, type: sql, conn: "sqlite:///x.db",
          ids: "SELECT id, t AS event_time FROM s WHERE t >= :start AND t < :end"}}
    alerts:
      - {{type: slack, conn: {slack}}}
      - {{type: pagerduty, conn: pd_orders, when: [findings, inconclusive, recovery],
          severity: critical}}
"""


@pytest.fixture
def recorder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HttpRecorder]:
    rec = HttpRecorder(tmp_path / "recorder",
                       {"/v2/enqueue": PAGERDUTY_ACCEPTED,
                        "/services/T0/B0/BROKEN": (500, "internal_error")}).start()
    for conn, path in (("slack_orders", SLACK_PATH), ("slack_broken", "/services/T0/B0/BROKEN")):
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn.upper()}", json.dumps({
            "conn_type": "slackwebhook", "host": f"{rec.url}/services",
            "password": path.removeprefix("/services/")}))
    monkeypatch.setenv("AIRFLOW_CONN_PD_ORDERS", json.dumps(
        {"conn_type": "pagerduty_events", "password": ROUTING_KEY}))
    monkeypatch.setenv("HTTPS_PROXY", rec.url)
    monkeypatch.setenv("SSL_CERT_FILE", str(rec.ca))  # the Events API client is httpx-based
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.setenv("KAFKA_RECON_UI_URL", "http://airflow.example:8080")
    monkeypatch.setenv("KAFKA_RECON_STORE", f"sqlite:///{tmp_path / 'history.db'}")
    yield rec
    rec.stop()


def _window(tmp_path: Path, day: datetime, missing: int, slack: str = "slack_orders") -> Any:
    """A run folder holding a concluded result of one day: `missing` lost on the consume side."""
    config = tmp_path / "flows.yaml"
    config.write_text(CONFIG.format(slack=slack))
    start, end = day.strftime("%Y-%m-%dT%H:%M:%SZ"), (day + timedelta(days=1)).strftime(
        "%Y-%m-%dT%H:%M:%SZ")
    run = orchestrate.load("orders", start, end, config, tmp_path / start[:10])
    cause = Cause(code="commit_ahead_of_processing", confidence="likely", seed="002",
                  summary="the sink's group committed offsets before writing the records",
                  evidence=["group 'loader' committed 100 past what it wrote"],
                  fix="commit after the write")
    found = [finding("loss", "consume", "topic->sink", missing, cause=cause)] if missing else []
    res = result("orders", day, tiers=[tier("topic", 100), tier("sink", 100 - missing)],
                 hops=[hop("topic", "sink", "consume", 100, 100 - missing, missing=missing)],
                 findings=found)
    run.folder.path.mkdir(parents=True, exist_ok=True)
    run.folder.result.write_text(res.dumps())
    return run, res


def test_findings_reach_slack_and_open_a_pagerduty_incident(
        recorder: HttpRecorder, tmp_path: Path) -> None:
    run, res = _window(tmp_path, DAY, missing=7)
    sent = orchestrate.alert(run).alerts
    assert [(a.type, a.event, a.sent) for a in sent] == [
        ("slack", "findings", True), ("pagerduty", "findings", True)]
    slack, pd = recorder.requests
    assert (slack["tls"], slack["path"]) == (False, SLACK_PATH)
    text = slack["body"]["text"]
    assert text.splitlines()[0] == res.verdict()
    assert "Top finding: 7 record(s) lost on the consume side (topic->sink). Most likely " \
           "because the sink's group committed offsets before writing the records" in text
    report = f"http://airflow.example:8080/recon/runs/orders/{run.out.name}/report.html"
    assert f"Report: {report}" in text
    # PagerDuty's client went to its fixed address, through the proxy, over TLS
    assert (pd["host"], pd["tls"], pd["path"]) == ("events.pagerduty.com", True, "/v2/enqueue")
    event = pd["body"]
    assert (event["routing_key"], event["event_action"], event["dedup_key"]) == (
        ROUTING_KEY, "trigger", "kafka-recon/orders")
    assert event["payload"]["summary"] == res.verdict()
    assert (event["payload"]["severity"], event["payload"]["source"],
            event["payload"]["component"]) == ("critical", "kafka-recon", "orders")
    assert event["payload"]["custom_details"]["top_finding"].startswith("7 record(s) lost")
    window = f"http://airflow.example:8080/recon/windows/orders/{run.out.name}"
    assert f"Window: {window}" in text
    assert event["links"] == [{"href": window, "text": "window"},
                              {"href": report, "text": "report"}]
    assert run.folder.read(Alerts, "alert").alerts == sent


def test_an_ok_window_after_findings_resolves_the_incident_and_then_stays_quiet(
        recorder: HttpRecorder, tmp_path: Path) -> None:
    bad, bad_result = _window(tmp_path, DAY, missing=3)
    history.record(bad_result, str(bad.out))
    good, good_result = _window(tmp_path, DAY + timedelta(days=1), missing=0)
    sent = orchestrate.alert(good).alerts
    # Slack hears of findings and inconclusive windows only (its default `when`)
    assert [(a.type, a.event, a.sent) for a in sent] == [
        ("slack", "recovery", False), ("pagerduty", "recovery", True)]
    [pd] = recorder.requests
    assert (pd["body"]["event_action"], pd["body"]["dedup_key"]) == (
        "resolve", "kafka-recon/orders")
    history.record(good_result, str(good.out))
    again, _ = _window(tmp_path, DAY + timedelta(days=2), missing=0)
    assert [a.sent for a in orchestrate.alert(again).alerts] == [False, False]
    assert len(recorder.requests) == 1, "an ok day after an ok day alerts nobody"


def test_a_failed_notifier_is_reported_and_never_stops_the_next(
        recorder: HttpRecorder, tmp_path: Path) -> None:
    run, _ = _window(tmp_path, DAY, missing=2, slack="slack_broken")
    slack, pd = orchestrate.alert(run).alerts
    assert slack.sent is False and slack.error and "500" in slack.error \
        and "\n" not in slack.error
    assert pd.sent is True
    assert [r["path"] for r in recorder.requests] == ["/services/T0/B0/BROKEN", "/v2/enqueue"]
