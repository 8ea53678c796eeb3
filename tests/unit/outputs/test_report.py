from __future__ import annotations

from pathlib import Path

import pytest

from kafka_recon.outputs.report import render_report, sentences
from kafka_recon.result.model import WindowJson
from kafka_recon.runfiles.outcomes import Validation
from kafka_recon.runfolder import RunFolder
from tests.factories import finding, hop, hours, replay, result, tier

pytestmark = pytest.mark.unit

# markup in names: payload and config text reaches the report
RESULT = result(
    "orders<script>", bucket_seconds=None,
    tiers=[tier("db", 10)],
    hops=[hop("db", "<b>topic</b>", "write", 10, 7, missing=3)],
    replays=[replay("g", 7)],
    findings=[finding("loss", "write", "db-><b>topic</b>", 3)])


def test_each_finding_is_one_sentence_naming_count_side_and_hop() -> None:
    assert sentences(RESULT) == [
        "orders<script>: 3 records lost on the write side between db and <b>topic</b>."]


def test_html_report_escapes_payload_markup(tmp_path: Path) -> None:
    paths = render_report(RESULT, RunFolder(tmp_path))
    html = Path(paths["html"]).read_text()
    assert "<script>" not in html and "orders&lt;script&gt;" in html
    assert "&lt;b&gt;topic&lt;/b&gt;" in html
    assert "3 records lost on the write side" in Path(paths["text"]).read_text()


def test_the_subject_says_status_first_then_flow_counts_and_window() -> None:
    assert RESULT.subject() == "FINDINGS orders<script>: 3 lost, 2026-11-20"
    five = result("f", findings=[finding("loss", "consume", "t->s", 1200),
                                 finding("duplicate", "write", "d->t", 2),
                                 finding("loss", "write", "d->t", 3)])
    five = five.model_copy(update={"window": WindowJson(start="2026-11-20T10:35:00Z",
                                                        end="2026-11-20T10:40:00Z")})
    assert five.subject() == "FINDINGS f: 1,203 lost, 2 duplicated, 2026-11-20 10:35-10:40 UTC"
    assert result("f").subject() == "OK f: every record accounted for, 2026-11-20"
    assert result("f", reasons=["a source could not be read"]).subject() == (
        "INCONCLUSIVE f: could not see every record, 2026-11-20")
    week = result("f", days=7)
    assert week.subject().endswith(", 2026-11-20 - 2026-11-26")
    late = five.model_copy(update={"window": WindowJson(start="2026-11-20T23:00:00Z",
                                                        end="2026-11-21T01:00:00Z")})
    assert late.subject().endswith(", 2026-11-20 23:00 - 2026-11-21 01:00 UTC")


def test_sentences_say_when_records_went_missing() -> None:
    def one(buckets: list[str]) -> str:
        r = result("orders", findings=[finding("loss", "consume", "orders_topic->warehouse", 12,
                                               buckets=buckets)])
        return sentences(r)[0]

    assert one(["2026-11-20T14:00:00Z"]) == (
        "orders: 12 records lost on the consume side between orders_topic and warehouse, "
        "14:00-15:00.")
    assert one(hours()[2:9]).endswith(", in 7 buckets from 02:00 to 09:00.")
    assert one(hours()).endswith(", in 24 buckets from 2026-11-20 00:00 to 2026-11-21 00:00.")


def test_late_records_and_tolerated_losses_are_said_as_such() -> None:
    r = result("orders", findings=[
        finding("late", "write", "db->topic", 2),
        finding("loss", "consume", "topic->sink", 1, within_tolerance=True)])
    assert sentences(r) == [
        "orders: 2 records late (arrived inside grace, not lost) on the write side between db "
        "and topic.",
        "orders: 1 records lost on the consume side between topic and sink (within tolerance)."]


def _bucketed(tmp_path: Path, ids: int = 25):  # type: ignore[no-untyped-def]
    four = hours(n=4)
    miss = tmp_path / "missing" / "db__topic.csv"
    miss.parent.mkdir(parents=True)
    miss.write_text("id\n" + "".join(f"<i>{n}\n" for n in range(ids)))
    return result(
        "orders", replays=[replay("g", 40 - ids)],
        tiers=[tier("db", 40, buckets={h: 10 for h in four}),
               tier("topic", 40 - ids, buckets={h: 10 - (ids if i == 1 else 0) if ids <= 10
                                                else 10 for i, h in enumerate(four)})],
        hops=[hop("db", "topic", "write", 40, 40 - ids, missing=ids,
                  missing_ids="missing/db__topic.csv",
                  buckets=[{"bucket": h, "expected": 10, "observed": 10,
                            "missing": ids if i == 1 else 0} for i, h in enumerate(four)])],
        findings=[finding("loss", "write", "db->topic", ids, ids="missing/db__topic.csv",
                          buckets=[four[1]])])


def test_report_embeds_a_chart_and_the_mail_version_points_at_it_by_content_id(tmp_path: Path
                                                                               ) -> None:
    paths = render_report(_bucketed(tmp_path), RunFolder(tmp_path))
    png = Path(paths["chart"]).read_bytes()
    assert png.startswith(b"\x89PNG")
    html = Path(paths["html"]).read_text()
    assert 'id="chart" class="chart" src="data:image/png;base64,' in html
    assert 'src="cid:chart.png"' in Path(paths["mail"]).read_text()
    # the answer comes before the chart
    assert html.index("25 records lost on the write side") < html.index('id="chart"')


def test_report_shows_the_first_ids_of_each_id_file_escaped(tmp_path: Path) -> None:
    paths = render_report(_bucketed(tmp_path), RunFolder(tmp_path))
    html = Path(paths["html"]).read_text()
    first = ", ".join(f"&lt;i&gt;{n}" for n in range(10))
    assert f"<code>{first}</code>, …" in html
    assert "&lt;i&gt;10" not in html  # ten, not more
    text = Path(paths["text"]).read_text()
    assert "missing at db->topic: 25 record(s), first 10: <i>0, <i>1" in text
    assert "(every id: missing/db__topic.csv)" in text


def test_a_rerun_without_buckets_removes_the_old_chart(tmp_path: Path) -> None:
    render_report(_bucketed(tmp_path), RunFolder(tmp_path))
    paths = render_report(RESULT, RunFolder(tmp_path))
    assert "chart" not in paths and not (tmp_path / "chart.png").exists()
    assert 'id="chart"' not in Path(paths["html"]).read_text()


def test_report_links_the_plugin_page_when_its_address_is_known(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_RECON_UI_URL", "http://airflow.example:8080/")
    run = tmp_path / "2026-11-20T000000Z_2026-11-21T000000Z"
    docs = run / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html"
    paths = render_report(RESULT, RunFolder(run), Validation(success=True, suites={},
                                                             data_docs=str(docs)))
    mail = Path(paths["mail"]).read_text().replace("%3C", "&lt;")
    folder = "orders&lt;script&gt;/2026-11-20T000000Z_2026-11-21T000000Z"
    base = "http://airflow.example:8080/recon"
    assert f'href="{base}/runs/{folder}/report.html"' in mail
    # the window's page first, and the validation as the plugin renders it (offline)
    assert f'href="{base}/windows/{folder}"' in mail
    assert f'href="{base}/windows/{folder}/validation"' in mail
    assert "gx/uncommitted" not in mail and str(tmp_path) not in mail
    text = Path(paths["text"]).read_text()
    assert f"this window: {base}/windows/orders<script>/" in text


def test_without_airflows_address_the_report_links_the_data_docs_in_its_folder(
        tmp_path: Path) -> None:
    run = tmp_path / "2026-11-20T000000Z_2026-11-21T000000Z"
    docs = run / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html"
    paths = render_report(RESULT, RunFolder(run), Validation(success=True, suites={},
                                                             data_docs=str(docs)))
    assert 'href="gx/uncommitted/data_docs/local_site/index.html"' in \
        Path(paths["html"]).read_text()
    assert str(tmp_path) not in Path(paths["mail"]).read_text()


def test_dead_lettered_records_are_said_apart_in_the_verdict_the_report_and_the_diagram(
        tmp_path: Path) -> None:
    from kafka_recon.outputs.window_view import diagram

    (tmp_path / "dead_lettered").mkdir()
    (tmp_path / "dead_lettered" / "topic__sink.csv").write_text(
        "id,error,message,topic,partition,offset,dlq_partition,dlq_offset\n"
        "7,org.postgresql.util.PSQLException,null value,orders,0,6,0,0\n")
    r = result(tiers=[tier("topic", 10), tier("sink", 9)],
               hops=[hop("topic", "sink", "consume", 10, 9, dead_lettered=1,
                         dead_lettered_ids="dead_lettered/topic__sink.csv",
                         dead_letter_topic="orders.dlq")],
               findings=[finding("dead_lettered", "consume", "topic->sink", 1,
                                 ids="dead_lettered/topic__sink.csv", topic="orders.dlq",
                                 allowed=0)])
    assert r.status == "findings" and r.subject().startswith("FINDINGS orders: 1 dead-lettered")
    assert "1 record(s) dead-lettered on the consume side (topic->sink)" in r.verdict()
    assert sentences(r)[0].startswith("orders: 1 records routed to a dead-letter queue (not "
                                      "lost, not loaded) on the consume side")
    paths = render_report(r, RunFolder(tmp_path))
    text = Path(paths["text"]).read_text()
    assert "(1 dead-lettered in orders.dlq)" in text
    assert "dead-lettered at topic->sink: 1 record(s), first 1: 7 (every id: " in text
    assert "<th>dead-lettered</th>" in Path(paths["html"]).read_text()
    [arrow] = diagram(r).arrows
    assert (arrow.dead_lettered, arrow.missing, arrow.bad) == (1, 0, True)
