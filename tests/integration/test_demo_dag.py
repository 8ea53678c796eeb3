"""End to end: the daily DAG, run by `airflow dags test`, mails a report with the true loss."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.demo.__main__ import lost_ids, run_demo
from harness.services.smtp import read_maildir
from tests.report_lines import html_lines, meaningless

pytestmark = pytest.mark.integration


def test_daily_dag_finds_and_mails_the_demo_consume_side_loss(tmp_path: Path,
                                                               artifacts_dir: Path) -> None:
    outcome = run_demo(tmp_path / "demo", orders=400, crash_after_batches=2)
    truth = outcome.facts["lost_consume_side"]
    assert truth, "the demo consumer must have lost records"
    assert truth == outcome.facts["consumer_dropped"], "the ledger names exactly what was lost"
    assert outcome.facts["lost_write_side"] == []

    result = outcome.result
    assert result is not None, f"no result.json in {outcome.run_dir}"
    assert result["status"] == "findings"
    assert [(f["kind"], f["side"], f["hop"], f["count"]) for f in result["findings"]
            if f["kind"] not in ("config_risk", "health")] == [
        ("loss", "consume", "orders_topic->warehouse", len(truth))]
    # the audit section: a single-node demo topic cannot have three replicas
    assert "T1-replication" in {f.get("rule") for f in result["findings"]}
    assert sorted(int(i) for i in lost_ids(outcome.run_dir, result)) == truth, \
        "the id file names exactly the records the consumer dropped"
    assert result["replays_consistent"] and len(result["replays"]) == 2
    assert outcome.dag_exit != 0, "a run with findings ends failed, so the UI shows it red"

    mails = read_maildir(tmp_path / "demo" / "mail")
    assert len(mails) == 1
    mail = mails[0]
    assert mail["To"] == "orders-team@example.com"
    assert "demo_orders" in mail["Subject"] and "FINDINGS" in mail["Subject"]
    html = mail.get_body(("html",))
    assert html is not None
    body = html.get_content()
    assert f"{len(truth)} records lost on the consume side between orders_topic and warehouse" \
        in body
    assert mail.get_body(("plain",)) is not None, "a text part for mail clients without HTML"
    related = mail.get_body(("related",))
    assert related is not None and 'src="cid:chart.png"' in body
    [chart] = [p for p in related.iter_parts() if p["Content-ID"] == "<chart.png>"]
    assert chart.get_content().startswith(b"\x89PNG")
    [csv] = list(mail.iter_attachments())
    assert csv.get_filename() == "orders_topic__warehouse.csv"
    assert sorted(int(i) for i in csv.get_content().split()[1:]) == truth

    # the history has the run, per hop and bucket
    from kafka_recon.outputs import history

    eng = history.engine(f"sqlite:///{tmp_path / 'demo' / 'runs' / 'history.db'}")
    [row] = history.flow_runs("demo_orders", eng=eng)
    assert row["status"] == "findings" and row["missing"] == len(truth)
    assert row["report"].endswith("report.html") and row["data_docs"].endswith("index.html")
    # every line of the report and the mail means something for this flow: no 'as of' for
    # its SQL tiers and topic, no seed column, the validation's failure in words
    assert meaningless(outcome.run_dir) == []
    assert [line for line in html_lines(body) if "as of" in line or "seed" in line] == []
    assert "orders_topic->warehouse: " in (outcome.run_dir / "report.txt").read_text()
    shutil.copy(outcome.mails[0], artifacts_dir / "demo-mail.eml")
    shutil.copy(outcome.run_dir / "report.html", artifacts_dir / "demo-report.html")
