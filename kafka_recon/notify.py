"""Step 6, notify: mail the report to the flow's owners through Airflow's SMTP provider.

The report is on disk before anything is sent, so a mail server that is down loses nothing; the
error propagates and the Airflow task retries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def subject(result: dict[str, Any]) -> str:
    w = result["window"]
    return f"[kafka-recon] {result['flow']} {w['start']}..{w['end']}: {result['status'].upper()}"


def send_report(result: dict[str, Any], report_html: Path | str, owners: list[str],
                smtp_conn_id: str = "smtp_default", attachments: list[str] | None = None) -> None:
    from airflow.providers.smtp.hooks.smtp import SmtpHook

    html = Path(report_html).read_text()
    with SmtpHook(smtp_conn_id=smtp_conn_id) as hook:
        hook.send_email_smtp(to=owners, subject=subject(result), html_content=html,
                             files=attachments or [])
