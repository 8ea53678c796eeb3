from __future__ import annotations

from pathlib import Path

import pytest

from kafka_recon.notify import subject
from kafka_recon.report import render_report, sentences

pytestmark = pytest.mark.unit

RESULT = {
    "flow": "orders<script>", "window": {"start": "2026-11-20T00:00:00Z",
                                         "end": "2026-11-21T00:00:00Z"},
    "status": "findings",
    "tiers": [{"name": "db", "count": 10, "distinct": 10}],
    "hops": [{"from": "db", "to": "<b>topic</b>", "side": "write", "expected": 10,
              "observed": 7, "missing": 3, "unexpected": 0, "duplicate": 0}],
    "replays": [{"group": "g", "count": 7, "distinct": 7, "fingerprint": "1"}],
    "replays_consistent": True,
    "findings": [{"kind": "loss", "side": "write", "hop": "db-><b>topic</b>", "count": 3}],
    "reasons": [],
}


def test_each_finding_is_one_sentence_naming_count_side_and_hop() -> None:
    assert sentences(RESULT) == [
        "orders<script>: 3 records lost on the write side between db and <b>topic</b>."]


def test_html_report_escapes_payload_markup(tmp_path: Path) -> None:
    paths = render_report(RESULT, tmp_path)
    html = Path(paths["html"]).read_text()
    assert "<script>" not in html and "orders&lt;script&gt;" in html
    assert "&lt;b&gt;topic&lt;/b&gt;" in html
    assert "3 records lost on the write side" in Path(paths["text"]).read_text()


def test_subject_carries_flow_window_and_status() -> None:
    assert subject(RESULT) == ("[kafka-recon] orders<script> "
                               "2026-11-20T00:00:00Z..2026-11-21T00:00:00Z: FINDINGS")


def test_sentences_say_when_records_went_missing() -> None:
    one = {**RESULT, "flow": "orders", "bucket_seconds": 3600,
           "findings": [{"kind": "loss", "side": "consume", "hop": "orders_topic->warehouse",
                         "count": 12, "buckets": ["2026-11-20T14:00:00Z"]}]}
    assert sentences(one) == ["orders: 12 records lost on the consume side between orders_topic "
                              "and warehouse, 14:00-15:00."]
    many = {**one, "findings": [{**one["findings"][0],
                                 "buckets": [f"2026-11-20T{h:02d}:00:00Z" for h in range(2, 9)]}]}
    assert sentences(many)[0].endswith(", in 7 buckets from 02:00 to 09:00.")
    whole_day = {**one, "findings": [{**one["findings"][0],
                                      "buckets": [f"2026-11-20T{h:02d}:00:00Z"
                                                  for h in range(24)]}]}
    assert sentences(whole_day)[0].endswith(
        ", in 24 buckets from 2026-11-20 00:00 to 2026-11-21 00:00.")


def _bucketed(tmp_path: Path, ids: int = 25) -> dict:
    hours = [f"2026-11-20T{h:02d}:00:00Z" for h in range(4)]
    miss = tmp_path / "missing" / "db__topic.csv"
    miss.parent.mkdir(parents=True)
    miss.write_text("id\n" + "".join(f"<i>{n}\n" for n in range(ids)))
    return {**RESULT, "flow": "orders", "bucket_seconds": 3600,
            "tiers": [{"name": "db", "count": 40, "distinct": 40,
                       "buckets": {h: 10 for h in hours}},
                      {"name": "topic", "count": 40 - ids, "distinct": 40 - ids,
                       "buckets": {h: 10 - (ids if i == 1 else 0) if ids <= 10 else 10
                                   for i, h in enumerate(hours)}}],
            "hops": [{"from": "db", "to": "topic", "side": "write", "expected": 40,
                      "observed": 40 - ids, "missing": ids, "unexpected": 0, "duplicate": 0,
                      "missing_ids": "missing/db__topic.csv",
                      "buckets": [{"bucket": h, "expected": 10, "observed": 10,
                                   "missing": ids if i == 1 else 0, "unexpected": 0,
                                   "duplicate": 0} for i, h in enumerate(hours)]}],
            "findings": [{"kind": "loss", "side": "write", "hop": "db->topic", "count": ids,
                          "ids": "missing/db__topic.csv", "buckets": [hours[1]]}]}


def test_report_embeds_a_chart_and_the_mail_version_points_at_it_by_content_id(tmp_path: Path
                                                                               ) -> None:
    paths = render_report(_bucketed(tmp_path), tmp_path)
    png = Path(paths["chart"]).read_bytes()
    assert png.startswith(b"\x89PNG")
    html = Path(paths["html"]).read_text()
    assert 'id="chart" src="data:image/png;base64,' in html
    assert 'src="cid:chart.png"' in Path(paths["mail"]).read_text()
    # the answer comes before the chart
    assert html.index("25 records lost on the write side") < html.index('id="chart"')


def test_report_shows_the_first_ids_of_each_id_file_escaped(tmp_path: Path) -> None:
    paths = render_report(_bucketed(tmp_path), tmp_path)
    html = Path(paths["html"]).read_text()
    first = ", ".join(f"&lt;i&gt;{n}" for n in range(10))
    assert f"<code>{first}</code>, …" in html
    assert "&lt;i&gt;10" not in html  # ten, not more
    text = Path(paths["text"]).read_text()
    assert "missing at db->topic: 25 record(s), first 10: <i>0, <i>1" in text
    assert "(every id: missing/db__topic.csv)" in text


def test_a_rerun_without_buckets_removes_the_old_chart(tmp_path: Path) -> None:
    render_report(_bucketed(tmp_path), tmp_path)
    paths = render_report(RESULT, tmp_path)
    assert "chart" not in paths and not (tmp_path / "chart.png").exists()
    assert 'id="chart"' not in Path(paths["html"]).read_text()


def test_report_links_the_plugin_page_when_its_address_is_known(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_RECON_UI_URL", "http://airflow.example:8080/")
    run = tmp_path / "2026-11-20T000000Z_2026-11-21T000000Z"
    docs = run / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html"
    paths = render_report(RESULT, run, {"success": True, "suites": {}, "data_docs": str(docs)})
    mail = Path(paths["mail"]).read_text()
    base = "http://airflow.example:8080/recon/runs/orders&lt;script&gt;/" \
           "2026-11-20T000000Z_2026-11-21T000000Z"
    assert f'href="{base}/report.html"' in mail.replace("%3C", "&lt;")
    assert "gx/uncommitted/data_docs/local_site/index.html" in mail
    assert 'href="gx/uncommitted/data_docs/local_site/index.html"' in \
        Path(paths["html"]).read_text()
