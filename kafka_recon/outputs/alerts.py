"""Alerts beyond the mail: a flow's `alerts` through Airflow's Slack and PagerDuty notifiers.

Each alert hears of the windows its `when` names: `findings`, `inconclusive`, and `recovery`
(an ok window after one that was not). What it says: the one-line verdict, the top finding
with its cause when known, and the links to the window's page, the report and the
validation. A PagerDuty event carries one dedup key per flow, so a recovery resolves the
incident the findings opened.

Every alert is tried; one that fails is reported with its error and never stops the others,
the mail or the verdict (they are other tasks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka_recon.runfiles.outcomes import AlertOutcome

if TYPE_CHECKING:
    from kafka_recon.config import Alert, Flow
    from kafka_recon.result.model import Finding, Result


def event_of(result: Result, previous: str | None) -> str | None:
    """What a window is to the alerts: its status, or `recovery` for an ok window after one
    that was not (None: an ok window after an ok one, or the first window)."""
    if result.status != "ok":
        return result.status
    return "recovery" if previous is not None and previous != "ok" else None


def top_finding(result: Result) -> Finding | None:
    """The finding an on-call person reads first: a failing one before one within tolerance,
    then the largest."""
    failing = [f for f in result.record_findings if f.words.failure]
    if not failing:
        return None
    return sorted(failing, key=lambda f: (f.within_tolerance, -f.count))[0]


def finding_line(f: Finding) -> str:
    """The finding as the verdict says it, and its cause's sentence when one is known."""
    from kafka_recon.outputs.report import why

    cause = why(f.cause)
    return f.short() + (f".{cause}" if cause else "")


@dataclass(frozen=True)
class Message:
    """What every alert of one window says."""
    event: str
    verdict: str
    top: str | None
    report: str | None
    validation: str | None
    window: str | None = None  # the window's page: its ids, causes and actions

    def text(self) -> str:
        head = {"recovery": "RECOVERED: "}.get(self.event, "")
        lines = [f"{head}{self.verdict}"]
        if self.top:
            lines.append(f"Top finding: {self.top}")
        if self.window:
            lines.append(f"Window: {self.window}")
        if self.report:
            lines.append(f"Report: {self.report}")
        if self.validation:
            lines.append(f"Validation: {self.validation}")
        return "\n".join(lines)


def message(result: Result, event: str, links: dict[str, str] | None) -> Message:
    top = top_finding(result)
    return Message(event=event, verdict=result.verdict(),
                   top=finding_line(top) if top else None,
                   report=(links or {}).get("report") or None,
                   validation=(links or {}).get("validation") or None,
                   window=(links or {}).get("window") or None)


def dedup_key(flow: Flow) -> str:
    """One PagerDuty incident per flow: its findings open it, its recovery resolves it."""
    return f"kafka-recon/{flow.name}"


def notifier(alert: Alert, flow: Flow, msg: Message) -> Any:
    """The Airflow provider's notifier for one alert of one window."""
    if alert.type == "slack":
        from airflow.providers.slack.notifications.slack_webhook import SlackWebhookNotifier

        return SlackWebhookNotifier(slack_webhook_conn_id=alert.conn, text=msg.text())
    from airflow.providers.pagerduty.notifications.pagerduty import PagerdutyNotifier

    links = [{"href": h, "text": t} for h, t in ((msg.window, "window"), (msg.report, "report"),
                                                  (msg.validation, "validation")) if h]
    return PagerdutyNotifier(
        pagerduty_events_conn_id=alert.conn, source="kafka-recon", component=flow.name,
        summary=msg.verdict[:1024],  # the Events API's limit
        severity=alert.severity if msg.event == "findings" else "warning",
        action="resolve" if msg.event == "recovery" else "trigger",
        dedup_key=dedup_key(flow), links=links,
        custom_details={"event": msg.event, "top_finding": msg.top})


def send_alerts(flow: Flow, result: Result, previous: str | None,
                links: dict[str, str] | None) -> list[AlertOutcome]:
    """Send every alert of the flow due for this window; what each did, in config order."""
    event = event_of(result, previous)
    out: list[AlertOutcome] = []
    for alert in flow.alerts:
        row = AlertOutcome(type=alert.type, conn=alert.conn, event=event, sent=False)
        if event is None or event not in alert.when:
            out.append(row.model_copy(update={"why": "not due"}))
            continue
        try:
            # `notify`, not the call: the text is ours, never a template to render
            notifier(alert, flow, message(result, event, links)).notify({})
            out.append(row.model_copy(update={"sent": True}))
        except Exception as exc:  # one failed notifier never stops the others
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            out.append(row.model_copy(update={"error": f"{type(exc).__name__}: {first}"}))
    return out
