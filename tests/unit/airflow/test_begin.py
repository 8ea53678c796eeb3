"""`begin`: one task waits for the window's closing time, then holds the window and clears its
previous outputs; nothing is held or cleared while the window is still open."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from kafka_recon import orchestrate
from kafka_recon.airflow.operators.begin import BeginOperator
from kafka_recon.errors import ReconError
from tests.factories import FLOWS

pytestmark = pytest.mark.unit

START, END = "2026-11-20T00:00:00Z", "2026-11-20T01:00:00Z"


@pytest.fixture(autouse=True)
def _flows(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KAFKA_RECON_CONFIG", str(FLOWS))
    monkeypatch.setenv("KAFKA_RECON_OUT", str(tmp_path / "runs"))


def _context(run_id: str) -> dict:
    return {"dag": SimpleNamespace(dag_id="recon__demo"), "run_id": run_id}


def _begin(target: datetime) -> BeginOperator:
    return BeginOperator(task_id="begin", flow="demo", start=START, end=END,
                         target_time=target.isoformat())


def _holder(run: orchestrate.Run) -> str | None:
    row = orchestrate.lease(run).holder()
    return row.owner if row is not None else None


def _an_earlier_runs_result(run: orchestrate.Run) -> Path:
    run.out.mkdir(parents=True, exist_ok=True)
    run.folder.result.write_text("{}")
    return run.folder.result


def test_a_closed_window_is_held_and_its_old_result_cleared_at_once() -> None:
    run = orchestrate.load("demo", START, END)
    old = _an_earlier_runs_result(run)
    out = _begin(datetime.now(UTC) - timedelta(seconds=5)).execute(_context("one"))
    assert out == str(run.out)
    assert not old.exists()
    assert _holder(run) == "recon__demo/one"
    # a second DAG run of the same window is refused, naming the first
    with pytest.raises(ReconError, match="recon__demo/one"):
        _begin(datetime.now(UTC)).execute(_context("two"))


def test_a_window_still_open_defers_and_neither_holds_nor_clears_anything() -> None:
    from airflow.sdk.exceptions import TaskDeferred

    run = orchestrate.load("demo", START, END)
    old = _an_earlier_runs_result(run)
    with pytest.raises(TaskDeferred) as deferred:
        _begin(datetime.now(UTC) + timedelta(minutes=5)).execute(_context("one"))
    assert deferred.value.method_name == "execute_complete"
    assert old.exists()
    assert _holder(run) is None
    # the trigger fired at the closing time: the resumed task begins the run
    assert _begin(datetime.now(UTC)).execute_complete(_context("one")) == str(run.out)
    assert not old.exists()
    assert _holder(run) == "recon__demo/one"
