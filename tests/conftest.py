"""Shared test setup: tests are tiered by marker (`unit`, `integration`); every module sets one."""

from __future__ import annotations

import pytest

# The integration tier runs as two pytest-xdist workers, a module to a worker (`make test`):
# most of its time is waiting (a scheduler's windows, service start-ups, JVMs), and the longest
# modules go first so that neither worker is left with a long one at the end (this order holds
# only with `--no-loadscope-reorder`: xdist otherwise hands out the modules with the most tests
# first). Seconds are each module's tests summed, measured on 2026-11-28 with three workers
# (so about a third above what two take); a module not named keeps its place after these.
SLOWEST_FIRST = (
    "test_install.py",           # ~740: the wheel into two fresh virtualenvs, a DAG run in each
    "test_repair_plan.py",       # ~680
    "test_repair_dag.py",        # ~500: Airflow's scheduler, an approval, a verifying run
    "test_dag_runs.py",          # ~480
    "test_two_hosts.py",         # ~430: Celery workers in network namespaces, Spark standalone
    "test_airflow_e2e.py",       # ~420
    "test_drill.py",             # ~380
    "test_lake_tables.py",       # ~350
    "test_cli.py",               # ~320
    "test_engine_scenarios.py",  # ~270
    "test_live_scheduler.py",    # two 2-minute windows under Airflow's scheduler: not
                                 # measured with three; 325 with two, 244 alone
    "test_mirror.py",            # ~220
    "test_spark_connect.py",
    "test_topic_chain.py",
    "test_secured_cluster.py",
    "test_spark_standalone.py",
    "test_spark_replay.py",
    "test_object_store.py",
    "test_demo_dag.py",
    "test_permissions.py",
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

