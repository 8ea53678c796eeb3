"""The owners' mail: text and HTML alternatives, the chart inline, id files attached and capped."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_recon.errors import UsageError
from kafka_recon.outputs.notify import build_message
from kafka_recon.outputs.report import render_report
from kafka_recon.result.model import Result
from kafka_recon.runfolder import RunFolder
from kafka_recon.settings import mail_attach_max_bytes
from tests.unit.outputs.test_report import _bucketed

pytestmark = pytest.mark.unit


def _run(tmp_path: Path, ids: int = 25) -> Result:
    result = _bucketed(tmp_path, ids)
    render_report(result, RunFolder(tmp_path))
    return result


def test_mail_has_text_and_html_with_the_chart_inline_and_the_ids_attached(tmp_path: Path
                                                                           ) -> None:
    msg = build_message(_run(tmp_path), RunFolder(tmp_path), ["a@example.com", "b@example.com"],
                        "recon@example.com", cap=10_000)
    assert msg["To"] == "a@example.com, b@example.com"
    assert msg["Subject"] == "FINDINGS orders: 25 lost, 2026-11-20"
    assert msg.get_content_type() == "multipart/mixed"
    text = msg.get_body(("plain",))
    html = msg.get_body(("html",))
    assert text is not None and "25 records lost on the write side" in text.get_content()
    assert html is not None and 'src="cid:chart.png"' in html.get_content()
    related = msg.get_body(("related",))
    assert related is not None
    [image] = [p for p in related.iter_parts() if p.get_content_type() == "image/png"]
    assert image["Content-ID"] == "<chart.png>"
    assert image.get_content().startswith(b"\x89PNG")
    [csv] = list(msg.iter_attachments())
    assert csv.get_filename() == "db__topic.csv"
    assert csv.get_content() == (tmp_path / "missing" / "db__topic.csv").read_text()
    assert "capped" not in text.get_content()


def test_an_id_file_over_the_cap_is_cut_at_a_line_and_the_mail_says_so(tmp_path: Path) -> None:
    msg = build_message(_run(tmp_path), RunFolder(tmp_path), ["a@example.com"],
                        "r@example.com", cap=40)
    [csv] = list(msg.iter_attachments())
    body = csv.get_content()
    assert len(body.encode()) <= 40 and body.endswith("\n")
    rows = body.splitlines()
    assert rows[0] == "id" and rows[1:] == [f"<i>{n}" for n in range(len(rows) - 1)]
    text = msg.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    assert (f"db__topic.csv: 25 ids; the attachment holds the first {len(rows) - 1} "
            "(mail attachments are capped at 40 bytes)") in text
    assert "capped at 40 bytes" in msg.get_body(("html",)).get_content()  # type: ignore[union-attr]


def test_the_cap_must_be_a_byte_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_RECON_MAIL_ATTACH_MAX_BYTES", "5MB")
    with pytest.raises(UsageError, match="KAFKA_RECON_MAIL_ATTACH_MAX_BYTES='5MB'"):
        mail_attach_max_bytes()


def test_a_long_subject_reaches_the_reader_exactly_as_written(tmp_path: Path) -> None:
    """Folded at 78 characters, a subject such as 'FINDINGS <flow>: <counts>, <window>' broke
    before its first word and read back with a leading space."""
    import email
    import email.policy

    from kafka_recon.outputs.notify import wire_bytes
    from kafka_recon.result.model import WindowJson

    result = _run(tmp_path).model_copy(update={
        "flow": "live_orders_from_the_shop_into_the_warehouse",
        "window": WindowJson(start="2026-11-26T08:40:00Z", end="2026-11-26T08:45:00Z")})
    msg = build_message(result, RunFolder(tmp_path), ["a@example.com"], "recon@example.com",
                        cap=10_000)
    sent = wire_bytes(msg)
    read = email.message_from_bytes(sent, policy=email.policy.default)
    assert len(result.subject()) > 78 - len("Subject: ")
    assert read["Subject"] == result.subject()
    assert b"\r\n" in sent and b"\n" not in sent.replace(b"\r\n", b"")
    body = read.get_body(("plain",))
    assert body is not None and "25 records lost" in body.get_content()
