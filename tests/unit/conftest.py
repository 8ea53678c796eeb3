"""Unit tests: nothing of one test is seen by another."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _a_store_of_its_own(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
                        ) -> None:
    """Each test's windows are leased in a store of its own (kafka-recon's default is SQLite in
    the runs root, which a test that gives only `--out` would share with every other)."""
    import os

    if not os.environ.get("KAFKA_RECON_STORE"):
        store = tmp_path_factory.mktemp("store") / "store.db"
        monkeypatch.setenv("KAFKA_RECON_STORE", f"sqlite:///{store}")
