"""The replays' pools are made by the scheduler when a kafka-recon run first needs them, in the
scheduler's own session; a pool an administrator sized is left as it is."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from kafka_recon.airflow.plugins import pools
from kafka_recon.airflow.plugins.reconciliation import ReconciliationPlugin

pytestmark = pytest.mark.unit


@pytest.fixture
def session() -> Iterator[Session]:
    """Airflow's own pool table, alone, in a database of the test's own; closed at its end (a
    connection left to the garbage collector runs Python at any moment, in any thread)."""
    from airflow.models.pool import Pool

    eng = create_engine("sqlite://")
    Pool.__table__.create(eng)
    with Session(eng, autoflush=False) as s:  # as Airflow's sessions are
        yield s
    eng.dispose()


def _run(session: Session, *task_pools: str) -> SimpleNamespace:
    run = SimpleNamespace(dag=SimpleNamespace(tasks=[SimpleNamespace(pool=p) for p in task_pools]))
    session.info["run"] = run
    return run


def test_a_runs_missing_pools_are_made_with_the_configured_slots_and_sized_ones_kept(
        monkeypatch: pytest.MonkeyPatch, session: Session) -> None:
    from airflow.models.pool import Pool

    monkeypatch.setenv("KAFKA_RECON_REPLAY_SLOTS", "3")
    session.add(Pool(pool="kafka_recon__sized", slots=7, include_deferred=False))
    session.commit()  # an administrator's, made long before
    run = _run(session, "default_pool", "kafka_recon__a:9092", "kafka_recon__sized")
    monkeypatch.setattr("sqlalchemy.orm.object_session", lambda obj: session)
    pools.on_dag_run_running(run, "started")
    session.commit()
    slots = {p: n for p, n in session.execute(select(Pool.pool, Pool.slots))}
    assert slots == {"kafka_recon__a:9092": 3, "kafka_recon__sized": 7}
    pools.on_dag_run_running(run, "started")  # once made, never again
    assert session.scalar(select(Pool.slots).where(Pool.pool == "kafka_recon__a:9092")) == 3


def test_runs_starting_in_one_scheduler_loop_make_their_pool_once(
        monkeypatch: pytest.MonkeyPatch, session: Session) -> None:
    """Two flows on one cluster start in the same loop, before the scheduler commits: the
    second run must not add the pool again (a duplicate failed the scheduler's whole
    transaction and stopped it)."""
    from airflow.models.pool import Pool

    monkeypatch.setattr("sqlalchemy.orm.object_session", lambda obj: session)
    for _ in range(3):
        pools.on_dag_run_running(_run(session, "kafka_recon__b:9092"), "started")
    session.commit()
    assert session.scalars(select(Pool.pool)).all() == ["kafka_recon__b:9092"]


def test_a_failing_listener_never_breaks_the_scheduler() -> None:
    pools.on_dag_run_running(SimpleNamespace(dag=SimpleNamespace(tasks=[
        SimpleNamespace(pool="kafka_recon__x")])), "started")  # no session: logged, not raised


def test_the_plugin_registers_the_listener() -> None:
    assert pools in ReconciliationPlugin.listeners


def test_airflow_loads_the_plugin_once_with_no_import_error(tmp_path: Path) -> None:
    """As `make ui` and the tests start Airflow: the repo's plugins folder and the installed
    entry point; a plugin registered twice is an import error on Airflow's home page."""
    import os
    import subprocess
    import sys

    from kafka_recon.settings import REPO_ROOT

    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path),
           "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO_ROOT / "plugins"),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    done = subprocess.run([sys.executable, "-c", (
        "from airflow import plugins_manager as pm; p, e = pm._get_plugins(); "
        "print([x.name for x in p].count('kafka_recon'), e)")],
        capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300, check=True)
    assert done.stdout.strip().splitlines()[-1] == "1 {}", done.stdout + done.stderr[-2000:]
