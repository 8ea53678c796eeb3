"""Shared test setup: tests are tiered by marker (`unit`, `integration`); every module sets one."""

from __future__ import annotations

import pytest

# The integration tier runs as two pytest-xdist workers, a module to a worker (`make test`):
# most of its time is waiting (a scheduler's windows, service start-ups, JVMs), and the longest
# modules go first so that neither worker is left with a long one at the end. Measured on a
# fresh clone (seconds, one worker); a module not named keeps its place after these.
SLOWEST_FIRST = (
    "test_live_scheduler.py",  # ~220: two 2-minute windows under Airflow's own scheduler
    "test_two_hosts.py",       # ~190: Celery workers in network namespaces, Spark standalone
    "test_install.py",         # ~130: the wheel into two fresh virtualenvs
    "test_airflow_e2e.py",
    "test_lake_tables.py",
    "test_repair_plan.py",
    "test_repair_dag.py",
    "test_dag_runs.py",
    "test_drill.py",
    "test_permissions.py",
    "test_demo_dag.py",
)


def _rank(item: pytest.Item) -> int:
    name = item.path.name
    return SLOWEST_FIRST.index(name) if name in SLOWEST_FIRST else len(SLOWEST_FIRST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not any(any(item.iter_markers(name)) for name in ("unit", "integration")):
            raise pytest.UsageError(f"{item.nodeid}: mark it unit or integration")
    items.sort(key=_rank)  # stable: a module's tests keep their order


@pytest.fixture(autouse=True)
def _airflow_defaults_again() -> object:
    """`kafka-recon`'s main makes this process a command line (paths default under the current
    directory); a test that calls it in process must not change the next test's defaults."""
    from kafka_recon import settings

    yield
    settings._cli = False

