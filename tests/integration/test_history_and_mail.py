"""The history on PostgreSQL through an Airflow connection, and a mail server that is down."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from harness.services.ports import free_port
from harness.services.smtp import MailCatcher, read_maildir
from kafka_recon import orchestrate
from kafka_recon.outputs import history
from kafka_recon.outputs.report import render_report
from kafka_recon.runfolder import RunFolder
from tests.factories import FLOWS
from tests.unit.outputs.test_history import DAY, result
from tests.unit.outputs.test_report import _bucketed

pytestmark = pytest.mark.integration


def test_history_on_postgresql_through_a_connection_replaces_a_rerun(
        postgres: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    url = postgres.create_database("recon_history")
    monkeypatch.setenv("AIRFLOW_CONN_RECON_HISTORY", url)
    monkeypatch.setenv("KAFKA_RECON_STORE", "recon_history")
    assert history.history_url().startswith("postgresql+psycopg2://")
    eng = history.engine()
    history.record(result(DAY, 10, missing=2, status="findings"), "/r", eng=eng)
    history.record(result(DAY, 10, missing=1, status="findings"), "/r", eng=eng)  # re-run
    for weeks in (1, 2):
        history.record(result(DAY - timedelta(weeks=weeks), 10), "/r", eng=eng)
    [latest] = history.latest_per_flow(eng)
    assert (latest["window_start"], latest["status"]) == ("2026-11-20T00:00:00Z", "findings")
    rows = history.flow_runs("clicks", eng=eng)
    assert [r["missing"] for r in rows] == [1, 0, 0]
    assert history.tier_volume("clicks", "clicks_topic", DAY - timedelta(weeks=1),
                               DAY - timedelta(days=6), eng) == 240


def test_a_history_made_before_the_replication_side_takes_a_mirrored_hop_on_postgresql(
        postgres: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from sqlalchemy import create_engine, text

    from tests.factories import DAY as START
    from tests.factories import hop, iso, tier
    from tests.factories import result as make_result

    monkeypatch.setenv("AIRFLOW_CONN_RECON_HISTORY_OLD",
                       postgres.create_database("recon_history_old"))
    monkeypatch.setenv("KAFKA_RECON_STORE", "recon_history_old")
    url = history.history_url()
    old = create_engine(url)
    with old.begin() as con:  # the table as an earlier version made it
        con.execute(text(
            "CREATE TABLE recon_hop_bucket (flow VARCHAR(200), window_start TIMESTAMPTZ, "
            "window_end TIMESTAMPTZ, hop VARCHAR(400), bucket TIMESTAMPTZ, side VARCHAR(10) "
            "NOT NULL, expected INTEGER NOT NULL, observed INTEGER NOT NULL, missing INTEGER "
            "NOT NULL, unexpected INTEGER NOT NULL, duplicate INTEGER NOT NULL, PRIMARY KEY "
            "(flow, window_start, window_end, hop, bucket))"))
    old.dispose()
    res = make_result("orders", tiers=[tier("regional", 10), tier("aggregate", 10)],
                      hops=[hop("regional", "aggregate", "replication", 10, 10, buckets=[
                          {"bucket": iso(START), "expected": 10, "observed": 10, "missing": 0,
                           "unexpected": 0, "duplicate": 0}])])
    eng = history.engine(url)
    history.record(res, "/r", eng=eng)
    with eng.connect() as con:
        assert con.execute(text("SELECT DISTINCT side FROM recon_hop_bucket")).scalar() == \
            "replication"


def test_a_mail_server_that_is_down_keeps_the_report_and_the_retry_delivers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    monkeypatch.setenv("AIRFLOW_CONN_SMTP_DEFAULT", json.dumps({
        "conn_type": "smtp", "host": "127.0.0.1", "port": port,
        "extra": {"disable_ssl": True, "disable_tls": True, "retry_limit": 0,
                  "from_email": "recon@example.com", "timeout": 5}}))
    run = tmp_path / "run"
    res = _bucketed(run)
    (run / "result.json").write_text(res.dumps())
    render_report(res, RunFolder(run))
    recon = orchestrate.load("demo", res.window.start, res.window.end, FLOWS, run)
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    with pytest.raises(Exception, match="(?i)connect|refused"):
        orchestrate.notify(recon)  # the Airflow task fails here and retries
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before, \
        "a failed send changes nothing on disk"
    with MailCatcher(tmp_path / "mail", port=port):
        assert orchestrate.notify(recon).startswith("FINDINGS ")  # the retry
    [mail] = read_maildir(tmp_path / "mail")
    assert mail["To"] == "orders-team@example.com"
    assert [a.get_filename() for a in mail.iter_attachments()] == ["db__topic.csv"]
