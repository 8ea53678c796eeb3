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
