"""The Prometheus metrics: the newest window of each flow, read from the history store at each
scrape; and who may scrape them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from kafka_recon.outputs import history
from kafka_recon.outputs.metrics import HistoryCollector, registry, run_seconds
from tests.unit.outputs.test_history import DAY, result

pytestmark = pytest.mark.unit


def samples(eng: Any, now: float) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    from prometheus_client import CollectorRegistry

    reg = CollectorRegistry(auto_describe=False)
    reg.register(HistoryCollector(eng, now=lambda: now))
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for m in reg.collect() for s in m.samples}


@pytest.fixture
def eng(tmp_path: Path) -> Any:
    eng = history.engine(f"sqlite:///{tmp_path / 'h.db'}")
    run = tmp_path / "run"
    run.mkdir()
    (run / "timings.json").write_text(json.dumps({"stage": 1.5, "replay": 20.25,
                                                  "spark_jobs": {"total": 9}}))
    # clicks: an older window with loss, then a clean newer one; orders: loss in its newest
    history.record(result(DAY - timedelta(days=1), 10, missing=4, status="findings"),
                   str(run), eng=eng)
    history.record(result(DAY, 10), str(run), eng=eng)
    history.record(result(DAY, 5, missing=3, status="findings", flow="orders"),
                   str(tmp_path / "gone"), eng=eng)
    return eng


def test_each_flows_newest_window_gives_its_hops_counts_and_status(eng: Any) -> None:
    now = (DAY + timedelta(days=1, hours=2)).timestamp()
    got = samples(eng, now)
    hop = (("flow", "orders"), ("hop", "clicks_topic->lake"), ("side", "consume"))
    assert got["kafka_recon_missing_records", hop] == 3
    assert got["kafka_recon_duplicate_records", hop] == 0
    # the older window's loss of clicks is history, not the current value
    assert got["kafka_recon_missing_records", (("flow", "clicks"),) + hop[1:]] == 0
    assert got["kafka_recon_status", (("flow", "orders"), ("status", "findings"))] == 1
    assert got["kafka_recon_status", (("flow", "orders"), ("status", "ok"))] == 0
    assert got["kafka_recon_status", (("flow", "clicks"), ("status", "ok"))] == 1
    assert got["kafka_recon_findings", (("flow", "orders"),)] == 1
    end = (DAY + timedelta(days=1)).timestamp()
    assert got["kafka_recon_window_end_timestamp_seconds", (("flow", "clicks"),)] == end
    assert got["kafka_recon_window_age_seconds", (("flow", "clicks"),)] == 7200
    assert got["kafka_recon_run_duration_seconds", (("flow", "clicks"),)] == 21.75
    # a run folder that is gone has no duration to give, and no made-up one
    assert ("kafka_recon_run_duration_seconds", (("flow", "orders"),)) not in got


def test_each_finding_says_what_its_tolerance_allowed_and_whether_it_failed(
        tmp_path: Path) -> None:
    from tests.factories import finding

    eng = history.engine(f"sqlite:///{tmp_path / 'h.db'}")
    within = finding("duplicate", "consume", "clicks_topic->lake", 4, within_tolerance=True,
                     allowed=5)
    beyond = finding("loss", "consume", "clicks_topic->lake", 3, allowed=2)
    history.record(result(DAY, 10, status="findings", findings=[within, beyond]), "/r",
                   eng=eng)
    got = samples(eng, (DAY + timedelta(days=2)).timestamp())
    labels = (("flow", "clicks"), ("hop", "clicks_topic->lake"), ("side", "consume"))
    assert got["kafka_recon_allowed_records", (*labels[:2], ("kind", "duplicate"),
                                                labels[2])] == 5
    assert got["kafka_recon_tolerance_exceeded", (*labels[:2], ("kind", "duplicate"),
                                                   labels[2])] == 0
    assert got["kafka_recon_tolerance_exceeded", (*labels[:2], ("kind", "loss"),
                                                   labels[2])] == 1


def test_the_window_length_and_closing_come_from_each_flows_config(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_recon.settings import REPO_ROOT

    config = (REPO_ROOT / "tests" / "data" / "flows.yaml").read_text()
    (tmp_path / "flows.yaml").write_text(config)
    monkeypatch.setenv("KAFKA_RECON_CONFIG", str(tmp_path / "flows.yaml"))
    from kafka_recon.config import load_flows

    flows = load_flows(tmp_path / "flows.yaml")
    eng = history.engine(f"sqlite:///{tmp_path / 'h.db'}")
    for name in ("clicks", "orders", "gone"):
        history.record(result(DAY, 10, flow=name), "/r", eng=eng)
    got = samples(eng, (DAY + timedelta(days=2)).timestamp())
    for name in ("clicks", "orders"):
        assert got["kafka_recon_window_seconds", (("flow", name),)] == \
            flows[name].window.total_seconds()
        assert got["kafka_recon_closing_seconds", (("flow", name),)] == \
            flows[name].closing.total_seconds()
    assert got["kafka_recon_window_seconds", (("flow", "clicks"),)] == 600
    # a flow recorded once but no longer configured has no schedule to give
    assert ("kafka_recon_window_seconds", (("flow", "gone"),)) not in got


def test_the_metrics_of_some_flows_leave_the_others_out_entirely(eng: Any) -> None:
    from prometheus_client import generate_latest

    text = generate_latest(registry(eng, flows={"clicks"})).decode()
    assert 'flow="clicks"' in text and 'flow="orders"' not in text


def test_the_exposition_is_prometheus_text_that_its_parser_reads_back(eng: Any) -> None:
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    text = generate_latest(registry(eng)).decode()
    assert "# TYPE kafka_recon_missing_records gauge" in text
    names = {f.name for f in text_string_to_metric_families(text)}
    assert {"kafka_recon_missing_records", "kafka_recon_status",
            "kafka_recon_window_age_seconds"} <= names


def test_an_empty_store_gives_no_samples_and_no_error(tmp_path: Path) -> None:
    eng = history.engine(f"sqlite:///{tmp_path / 'empty.db'}")
    assert samples(eng, datetime(2026, 11, 22, tzinfo=UTC).timestamp()) == {}


def test_run_seconds_adds_the_step_laps_only(tmp_path: Path) -> None:
    (tmp_path / "timings.json").write_text('{"a": 1, "b": 2.5, "spark_jobs": {"total": 40}}')
    assert run_seconds(str(tmp_path)) == 3.5
    (tmp_path / "timings.json").write_text("not json")
    assert run_seconds(str(tmp_path)) is None and run_seconds(None) is None


# ------------------------------------------------------------------ who may scrape
@pytest.fixture
def app(eng: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from airflow.api_fastapi.core_api import security
    from fastapi import HTTPException
    from fastapi.testclient import TestClient

    from kafka_recon.airflow.plugins.ui import create_app

    async def no_such_login(token: str | None) -> None:
        raise HTTPException(401, "not logged in")

    # Airflow's login stands in here as one that knows nobody (its auth manager lives in the
    # api-server); the real one is scraped through in the integration tier
    monkeypatch.setattr(security, "resolve_user_from_token", no_such_login)
    monkeypatch.setenv("KAFKA_RECON_STORE", f"sqlite:///{tmp_path / 'h.db'}")
    monkeypatch.setenv("KAFKA_RECON_OUT", str(tmp_path))
    return TestClient(create_app())


def test_a_scraper_with_the_metrics_token_is_answered(app: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_RECON_METRICS_TOKEN", "s3cret")
    r = app.get("/metrics", headers={"Authorization": "Bearer s3cret"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert 'kafka_recon_missing_records{flow="orders",hop="clicks_topic->lake",' \
           'side="consume"} 3.0' in r.text


@pytest.mark.parametrize("header", [None, "Bearer wrong", "Basic s3cret", "Bearer "])
def test_without_the_token_or_a_login_the_metrics_are_refused(
        app: Any, monkeypatch: pytest.MonkeyPatch, header: str | None) -> None:
    monkeypatch.setenv("KAFKA_RECON_METRICS_TOKEN", "s3cret")
    r = app.get("/metrics", headers={"Authorization": header} if header else {})
    assert r.status_code in (401, 403), r.text
    assert "kafka_recon" not in r.text


def test_with_no_token_set_a_bearer_is_not_enough(app: Any,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_RECON_METRICS_TOKEN", raising=False)
    r = app.get("/metrics", headers={"Authorization": "Bearer "})
    assert r.status_code in (401, 403)


def test_the_docs_alert_rules_are_the_shipped_rule_file() -> None:
    from kafka_recon.settings import REPO_ROOT

    rules = (REPO_ROOT / "config" / "prometheus" / "kafka_recon_rules.yml").read_text()
    assert rules.strip() in (REPO_ROOT / "docs" / "platform.md").read_text()


def test_each_tiers_records_and_the_band_its_volume_was_judged_against(tmp_path: Path) -> None:
    from kafka_recon.runfiles.bands import Bands, BucketBand
    from tests.factories import hours

    eng = history.engine(f"sqlite:///{tmp_path / 'h.db'}")
    day = hours(DAY)
    # the topic judged over 20 of its 24 hours (4 had too little history), the lake not at all
    bands = Bands(bands=[BucketBand(tier="clicks_topic", bucket=h, low=8, high=12, median=10,
                                    references=9, basis="the same hour on 9 days")
                         for h in day[4:]])
    history.record(result(DAY, 10), str(tmp_path), eng=eng, bands=bands)
    got = samples(eng, (DAY + timedelta(days=1)).timestamp())
    topic, lake = (("flow", "clicks"), ("tier", "clicks_topic")), (("flow", "clicks"),
                                                                      ("tier", "lake"))
    assert got["kafka_recon_tier_records", topic] == 240
    assert got["kafka_recon_tier_judged_records", topic] == 200
    assert (got["kafka_recon_tier_expected_low_records", topic],
            got["kafka_recon_tier_expected_high_records", topic]) == (160, 240)
    assert got["kafka_recon_tier_records", lake] == 240
    assert ("kafka_recon_tier_expected_low_records", lake) not in got
