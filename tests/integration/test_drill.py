"""The loss drill's fast subset, in `make test`: real faults on a three-broker cluster.

S2 (acknowledged records lost to a killed leader), S5 (auto-commit past a crash), S7
(duplicates from retries without idempotence) and S12 (the safe configuration under the same
faults, silent). Each must pass: the findings equal the truth from the apps' ledgers and a
plain read of the tiers, kind, side, hop, count and ids. `make drill` runs all fifteen.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.drill.runner import CLUSTER_CONFIG, run_scenario
from harness.drill.scenarios import SCENARIOS
from harness.services.kafka import KafkaCluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    c = KafkaCluster(tmp_path_factory.mktemp("drill-cluster"), size=3,
                     broker_config=CLUSTER_CONFIG)
    c.start()
    yield c
    c.stop()


def _explain(row: dict[str, Any]) -> str:
    return json.dumps(row["attempts"], indent=1, default=str)[:4000]


@pytest.mark.parametrize("scenario", ["S2", "S5", "S7"])
def test_a_real_fault_is_found_with_the_exact_ids_on_the_right_side(
        scenario: str, cluster: KafkaCluster, spark: Any, tmp_path: Path) -> None:
    row = run_scenario(SCENARIOS[scenario], cluster, spark, tmp_path, attempts=3)
    assert row["result"] == "pass", _explain(row)
    last = row["attempts"][-1]
    (kind, side, hop), = SCENARIOS[scenario].expected
    flow = last["flows"][0]
    assert flow["found"] == flow["truth"]
    key = f"{kind}/{side}/{hop.format(sink='sink')}"
    assert flow["found"][key] > 0
    # and why: the scenario's true cause, read from the flight recorder and the topic
    assert flow["causes"][key].split()[0] == SCENARIOS[scenario].causes[0], flow["causes"]
    assert last["evidence"], "the act recorded what it saw before and after the fault"


def test_the_safe_configuration_stays_silent_under_the_same_faults(
        cluster: KafkaCluster, spark: Any, tmp_path: Path) -> None:
    row = run_scenario(SCENARIOS["S12"], cluster, spark, tmp_path, attempts=1)
    assert row["result"] == "pass", _explain(row)
    last = row["attempts"][-1]
    assert [f["status"] for f in last["flows"]] == ["ok"]
    # the faults did happen: a leader was killed and the consumer crashed mid-batch
    assert any("SIGKILLed" in e and "leader" in e for e in last["evidence"])
    assert any("consumer SIGKILLed" in e for e in last["evidence"])
