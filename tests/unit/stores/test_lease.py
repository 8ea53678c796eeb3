"""One run per window across hosts: the lease in kafka-recon's store (here SQLite; the
integration tier races PostgreSQL from two processes)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafka_recon import orchestrate
from kafka_recon.errors import RunInProgress, StoreUnreachable
from kafka_recon.stores.lease import Lease, leases
from tests.factories import FLOWS

pytestmark = pytest.mark.unit

START, END = "2026-11-20T00:00:00Z", "2026-11-21T00:00:00Z"


@pytest.fixture
def run(tmp_path: Path) -> orchestrate.Run:
    return orchestrate.load("demo", START, END, FLOWS, tmp_path / "run")


def test_a_second_run_of_a_window_is_refused_naming_the_first_until_it_lets_go(
        run: orchestrate.Run) -> None:
    orchestrate.begin(run, "recon__demo/scheduled__2026-11-21")
    with pytest.raises(RunInProgress, match=r"recon__demo/scheduled__2026-11-21 on .*lease runs"):
        orchestrate.begin(run, "recon_adhoc/manual__1")
    orchestrate.check_owner(run, "recon__demo/scheduled__2026-11-21")
    orchestrate.finish(run, "recon_adhoc/manual__1")  # not its to let go: nothing happens
    with pytest.raises(RunInProgress):
        orchestrate.begin(run, "recon_adhoc/manual__1")
    orchestrate.finish(run, "recon__demo/scheduled__2026-11-21")
    orchestrate.begin(run, "recon_adhoc/manual__1")
    # the first run's remaining tasks now stop instead of interleaving with the second
    with pytest.raises(RunInProgress, match="took it after this one"):
        orchestrate.check_owner(run, "recon__demo/scheduled__2026-11-21")


def test_another_window_or_flow_is_not_held(run: orchestrate.Run) -> None:
    orchestrate.begin(run, "a/1")
    window = run.window.as_json()
    Lease.of("other_flow", window).claim("b/1")
    Lease.of("demo", {**window, "end": "2026-11-22T00:00:00Z"}).claim("c/1")


def test_an_expired_lease_is_taken_and_its_holder_stops_at_its_next_task(
        run: orchestrate.Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_RECON_LEASE_SECONDS", "10")
    orchestrate.begin(run, "recon__demo/killed")
    with pytest.raises(RunInProgress):
        orchestrate.begin(run, "recon__demo/next")
    lease = orchestrate.lease(run)
    from kafka_recon.stores.database import engine

    with engine(lease.url, leases.metadata).begin() as con:  # its host died a while ago
        con.execute(leases.update().values(expires=0.0))
    orchestrate.begin(run, "recon__demo/next")
    with pytest.raises(RunInProgress, match="took it after this one"):
        orchestrate.check_owner(run, "recon__demo/killed")
    with pytest.raises(RunInProgress, match="no longer holds"):
        lease.renew("recon__demo/killed")


def test_a_task_renews_the_lease_while_it_runs(run: orchestrate.Run,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_RECON_LEASE_SECONDS", "10")
    orchestrate.begin(run, "a/1")
    lease = orchestrate.lease(run)
    before = lease.holder().expires
    with orchestrate.held(run, "a/1"):
        time.sleep(2.5)  # a beat every ttl/6, at least a second
    assert lease.holder().expires > before + 1


def test_a_command_line_run_holds_the_window_while_its_process_lives(
        run: orchestrate.Run) -> None:
    holder = subprocess.Popen([sys.executable, "-c", (
        "import time; from kafka_recon import orchestrate; from tests.factories import FLOWS; "
        f"run = orchestrate.load('demo', {START!r}, {END!r}, FLOWS, "
        f"__import__('pathlib').Path({str(run.out)!r})); "
        "cm = orchestrate.exclusive(run); cm.__enter__(); "
        "print('held', flush=True); time.sleep(60)")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(RunInProgress, match=f"process {holder.pid} on"), \
                orchestrate.exclusive(run):
            pass
        with pytest.raises(RunInProgress, match=f"process {holder.pid}"):
            orchestrate.begin(run, "recon__demo/scheduled")  # an Airflow run is refused too
    finally:
        holder.kill()
        holder.wait()
    with orchestrate.exclusive(run):  # a dead process on this host holds nothing, at once
        pass
    assert orchestrate.lease(run).holder() is None, "a finished run lets the window go"


def test_a_store_that_does_not_answer_is_one_line_naming_it(
        run: orchestrate.Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "not-a-db").mkdir()
    monkeypatch.setenv("KAFKA_RECON_STORE", f"sqlite:///{tmp_path / 'not-a-db'}")
    with pytest.raises(StoreUnreachable, match=r"^kafka-recon's store \(sqlite file .*not-a-db\) "
                                               r"did not answer: "):
        orchestrate.begin(run, "a/1")


def _spark_step(run: orchestrate.Run) -> object:
    from kafka_recon.airflow.operators.spark_submit import ReconSparkSubmitOperator

    args = ["--config", str(FLOWS), "--flow", "demo", "--start", START, "--end", END,
            "--out", str(run.folder.path)]
    return ReconSparkSubmitOperator(task_id="replay_reconcile", step="replay_reconcile",
                                    flow="demo", config=str(FLOWS), application_args=args)


def test_the_spark_step_renews_the_lease_from_its_tasks_start_and_stops_if_it_was_taken(
        run: orchestrate.Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between the task's start and the job's first renewal lies spark-submit's start: held
    by the task meanwhile, or the step never submits once another run took the window."""
    from types import SimpleNamespace

    monkeypatch.setenv("KAFKA_RECON_LEASE_SECONDS", "10")
    context = {"dag": SimpleNamespace(dag_id="recon__demo"), "run_id": "scheduled__1"}
    orchestrate.begin(run, "recon__demo/scheduled__1")
    lease = orchestrate.lease(run)
    before = lease.holder().expires
    _spark_step(run)._hold_window(context)  # type: ignore[attr-defined]
    time.sleep(2.5)
    assert lease.holder().expires > before + 1
    orchestrate.finish(run, "recon__demo/scheduled__1")
    orchestrate.begin(run, "recon_adhoc/manual__2")
    with pytest.raises(RunInProgress, match="took it after this one"):
        _spark_step(run)._hold_window(context)  # type: ignore[attr-defined]


def test_a_repair_steps_task_leaves_the_window_to_its_job(run: orchestrate.Run) -> None:
    """The repair DAG's run holds no window (it may wait days for an approval): its Spark job
    holds the window for itself, as a command line run does, so its task claims nothing."""
    from types import SimpleNamespace

    from kafka_recon.airflow.operators.spark_submit import ReconSparkSubmitOperator

    args = ["--config", str(FLOWS), "--flow", "demo", "--start", START, "--end", END,
            "--out", str(run.folder.path)]
    for step in orchestrate.REPAIR_STEPS:
        op = ReconSparkSubmitOperator(task_id=step, step=step, flow="demo", config=str(FLOWS),
                                      application_args=args)
        op._hold_window({"dag": SimpleNamespace(dag_id="recon_repair"), "run_id": "manual__1"})
        assert orchestrate.lease(run).holder() is None
