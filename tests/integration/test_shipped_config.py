"""The flow config that ships (config/flows.yaml, the demo flow) parses into its daily DAG.

Unit tests use their own flows (tests/data/); this checks the shipped file itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_recon.settings import REPO_ROOT
from tests.unit.dags.test_dags import _probe

pytestmark = pytest.mark.integration


def test_the_shipped_flow_config_parses_into_its_daily_dag(tmp_path: Path) -> None:
    bag = _probe(tmp_path, REPO_ROOT / "config" / "flows.yaml")
    assert bag["errors"] == {}
    # and the shipped flow's topic goes to the flight recorder
    assert sorted(bag["dags"]) == ["recon__demo_orders", "recon_adhoc", "recon_repair",
                                   "recon_snapshots"]
    assert bag["dags"]["recon_snapshots"]["tasks"] == ["snapshot__demo_orders"]
