"""Step 6, notify: mail the report to the flow's owners through Airflow's SMTP provider.

One mail per run: a plain-text part and an HTML part with the chart inline (cid:), and the
missing-id CSVs attached up to a size cap; an id file that does not fit is cut at a line and the
mail says so. The report is on disk before anything is sent, so a mail server that is down loses
nothing; the error propagates and the Airflow task retries.
"""

from __future__ import annotations

import smtplib
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from upath import UPath

from kafka_recon.result.model import Result
from kafka_recon.runfolder import RunFolder
from kafka_recon.settings import mail_attach_max_bytes


@dataclass
class Attachment:
    name: str
    data: bytes
    rows: int  # ids in the attachment
    total: int  # ids in the whole file
    source: UPath

    @property
    def capped(self) -> bool:
        return self.rows < self.total


def missing_attachments(result: Result, folder: RunFolder, cap: int) -> list[Attachment]:
    """The missing-id files, whole while the cap allows, then cut at a line boundary."""
    out: list[Attachment] = []
    budget = cap
    for h in result.hops:
        rel = h.missing_ids
        if not rel or not h.missing:
            continue
        path = folder.inside(rel)
        if not path.exists():
            continue
        data = path.read_bytes()
        total = max(0, data.count(b"\n") - 1)  # a header line, then one id per line
        if len(data) > budget:
            cut = data.rfind(b"\n", 0, max(budget, 0))
            data = data[:cut + 1] if cut > 0 else b""
        rows = max(0, data.count(b"\n") - 1)
        budget -= len(data)
        out.append(Attachment(path.name, data, rows, total, path))
    return out


def cap_lines(attachments: list[Attachment], cap: int) -> list[str]:
    return [f"{a.name}: {a.total} ids; the attachment holds the first {a.rows} "
            f"(mail attachments are capped at {cap} bytes). Every id is in {a.source}."
            for a in attachments if a.capped]


def build_message(result: Result, folder: RunFolder, owners: list[str], sender: str,
                  cap: int | None = None) -> EmailMessage:
    """multipart/mixed: [alternative: text, related: (html, chart)], CSV attachments."""
    cap = mail_attach_max_bytes() if cap is None else cap
    attachments = missing_attachments(result, folder, cap)
    notes = cap_lines(attachments, cap)
    text = folder.file("report_txt").read_text()
    html = folder.file("mail_html").read_text()
    if notes:
        text += "\n" + "\n".join(notes) + "\n"
        from html import escape

        block = "".join(f"<p class='capped'>{escape(n)}</p>" for n in notes)
        html = html.replace("</body>", block + "</body>")
    msg = EmailMessage()
    msg["Subject"] = result.subject()
    msg["From"] = sender
    msg["To"] = ", ".join(owners)
    msg["Date"] = formatdate(localtime=False)
    msg["Message-ID"] = make_msgid(domain="kafka-recon")
    msg.set_content(text)
    msg.add_alternative(html, subtype="html")
    chart = folder.file("chart")
    if chart.exists():
        html_part = msg.get_body(("html",))
        if not isinstance(html_part, EmailMessage):  # set_content/add_alternative made it
            raise RuntimeError("the mail has no HTML part to put the chart in")
        html_part.add_related(chart.read_bytes(), maintype="image", subtype="png",
                              cid=f"<{chart.name}>", filename=chart.name, disposition="inline")
    for a in attachments:
        if a.rows or not a.capped:
            msg.add_attachment(a.data, maintype="text", subtype="csv", filename=a.name)
    return msg


def send_report(result: Result, folder: RunFolder, owners: list[str],
                smtp_conn_id: str = "smtp_default") -> EmailMessage:
    """Send through the connection `smtp_conn_id`: its host, port, login, TLS and from_email."""
    from airflow.providers.smtp.hooks.smtp import SmtpHook

    with SmtpHook(smtp_conn_id=smtp_conn_id) as hook:
        sender = hook.from_email or "kafka-recon@localhost"
        msg = build_message(result, folder, owners, sender)
        client = hook._smtp_client  # the hook opens, logs in and closes; we send one message
        if not isinstance(client, smtplib.SMTP):
            raise RuntimeError(f"SMTP connection '{smtp_conn_id}' did not open")
        client.sendmail(sender, owners, wire_bytes(msg))
    return msg


def wire_bytes(msg: EmailMessage) -> bytes:
    """The message as sent: CRLF line ends, and headers folded only past RFC 5322's hard
    limit (998). Python's folding at 78 breaks a subject such as '[kafka-recon] <flow>
    <start>..<end>: FINDINGS' before its first word, and readers then see it with a leading
    space. The parts' bodies were encoded when they were added, so they are untouched."""
    return msg.as_bytes(policy=msg.policy.clone(linesep="\r\n", max_line_length=998))
