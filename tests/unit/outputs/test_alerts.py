"""Which windows a flow's alerts hear of, and what they say."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_recon.config import load_flow
from kafka_recon.errors import ConfigError
from kafka_recon.outputs.alerts import event_of, message, top_finding
from tests.factories import finding, result

pytestmark = pytest.mark.unit

FLOW = """
flows:
  orders:
    owners: [a@example.com]
    record: {id: "$.id", event_time: "$.ts"}
    tiers:
      - {name: topic, type: kafka, bootstrap: "a:9092", topic: orders}
      - {name: sink, type: sql, conn: "sqlite:///x.db",
         ids: "SELECT id, t AS event_time FROM s WHERE t >= :start AND t < :end"}
    alerts: ALERTS
"""


def flow(tmp_path: Path, alerts: str) -> object:
    p = tmp_path / "flows.yaml"
    p.write_text(FLOW.replace("ALERTS", alerts))
    return load_flow(p, "orders")


@pytest.mark.parametrize(("status", "previous", "event"), [
    ("findings", None, "findings"), ("inconclusive", "ok", "inconclusive"),
    ("ok", "findings", "recovery"), ("ok", "inconclusive", "recovery"),
    ("ok", "ok", None), ("ok", None, None)])
def test_a_window_is_findings_inconclusive_a_recovery_or_nothing_to_alert(
        status: str, previous: str | None, event: str | None) -> None:
    findings = [finding("loss", "consume", "t->s", 1)] if status == "findings" else []
    r = result(findings=findings, status=status,
               reasons=["a source could not be read"] if status == "inconclusive" else [])
    assert event_of(r, previous) == event


def test_the_top_finding_is_a_failing_one_before_one_within_tolerance_then_the_largest(
        ) -> None:
    r = result(findings=[finding("loss", "write", "db->t", 900, within_tolerance=True),
                         finding("loss", "consume", "t->s", 3),
                         finding("duplicate", "consume", "t->s", 40),
                         finding("late", "write", "db->t", 5000)])
    top = top_finding(r)
    assert top is not None and (top.kind, top.count) == ("duplicate", 40)
    text = message(r, "findings", {"report": "http://a/r.html", "validation": ""}).text()
    assert text.splitlines() == [r.verdict(),
                                 "Top finding: 40 record(s) duplicated on the consume side "
                                 "(t->s)", "Report: http://a/r.html"]
    assert message(result(), "recovery", None).text().startswith("RECOVERED: orders ")


def test_alerts_default_to_findings_and_inconclusive(tmp_path: Path) -> None:
    f = flow(tmp_path, "[{type: slack, conn: s}, {type: pagerduty, conn: p, "
                       "when: [recovery], severity: critical}]")
    slack, pd = f.alerts  # type: ignore[attr-defined]
    assert slack.when == ["findings", "inconclusive"] and pd.when == ["recovery"]


@pytest.mark.parametrize(("alerts", "error"), [
    ("[{type: teams, conn: t}]", "alerts.0.type"),
    ("[{type: slack, conn: s, when: []}]", "alerts.0.when"),
    ("[{type: slack, conn: s, when: [always]}]", "alerts.0.when"),
    ("[{type: slack}]", "alerts.0.conn"),
])
def test_an_alert_that_cannot_be_sent_is_a_config_error(tmp_path: Path, alerts: str,
                                                        error: str) -> None:
    with pytest.raises(ConfigError, match=error.replace(".", r"\.")):
        flow(tmp_path, alerts)
