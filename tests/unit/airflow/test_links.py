"""A run's Spark step and its verdict link the window's page, from the flow and window they
were rendered with."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kafka_recon.airflow.links import WindowPageLink
from kafka_recon.settings import REPO_ROOT

pytestmark = pytest.mark.unit

PAGE = "/recon/windows/orders/2026-11-20T000000Z_2026-11-21T000000Z"


def test_the_link_names_the_window_a_spark_step_or_a_verdict_was_rendered_with(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_RECON_UI_URL", raising=False)
    step = SimpleNamespace(application_args=[
        "--config", "c.yaml", "--flow", "orders", "--start", "2026-11-20T00:00:00+00:00",
        "--end", "2026-11-21T00:00:00+00:00", "--out", "/runs/x"])
    verdict = SimpleNamespace(op_kwargs={"flow": "orders", "start": "2026-11-20T00:00:00Z",
                                         "end": "2026-11-21T00:00:00Z"})
    link = WindowPageLink()
    assert link.get_link(step, ti_key=None) == PAGE
    assert link.get_link(verdict, ti_key=None) == PAGE
    monkeypatch.setenv("KAFKA_RECON_UI_URL", "http://airflow.example:8080/")
    assert link.get_link(verdict, ti_key=None) == f"http://airflow.example:8080{PAGE}"
    assert link.get_link(SimpleNamespace(), ti_key=None) == ""


def test_the_spark_step_and_the_verdict_of_every_dag_carry_the_link(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_RECON_CONFIG", str(REPO_ROOT / "tests" / "data" / "flows.yaml"))
    from kafka_recon.dags import flow_dags

    dags = flow_dags()
    for dag_id in ("recon__orders", "recon_adhoc"):
        dag = dags[dag_id]
        for task_id in ("replay_reconcile", "verdict"):
            names = [x.name for x in dag.get_task(task_id).operator_extra_links]
            assert names == ["Reconciliation window"], (dag_id, task_id, names)


def test_an_ad_hoc_runs_note_names_its_flow_and_window() -> None:
    from kafka_recon.airflow.plugins.run_notes import note_of

    assert note_of({"flow": "orders", "start": "2026-11-20T00:00:00Z",
                    "end": "2026-11-21T00:00:00Z", "replays": 2}) == (
        "orders 2026-11-20T00:00:00Z – 2026-11-21T00:00:00Z")
    assert note_of({}) is None and note_of(None) is None and note_of({"flow": "x"}) is None
