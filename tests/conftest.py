"""Shared test setup: tests are tiered by marker (`unit`, `integration`); every module sets one."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not any(any(item.iter_markers(name)) for name in ("unit", "integration")):
            raise pytest.UsageError(f"{item.nodeid}: mark it unit or integration")


@pytest.fixture(autouse=True)
def _airflow_defaults_again() -> object:
    """`kafka-recon`'s main makes this process a command line (paths default under the current
    directory); a test that calls it in process must not change the next test's defaults."""
    from kafka_recon import settings

    yield
    settings._cli = False

