"""DAG integrity and policy: the DagBag loads, ids are expected, parsing stays light."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_recon.devenv.airflow import airflow_env
from kafka_recon.paths import REPO_ROOT

pytestmark = pytest.mark.unit

PROBE = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
heavy = [m for m in ("pyspark", "pandas", "great_expectations") if m in sys.modules]
dags = {d.dag_id: {"tasks": sorted(t.task_id for t in d.tasks),
                   "owners": sorted({t.owner for t in d.tasks}),
                   "retries": sorted({t.retries for t in d.tasks}),
                   "catchup": d.catchup, "tags": sorted(d.tags)}
        for d in bag.dags.values()}
print(json.dumps({"errors": {k: str(v) for k, v in bag.import_errors.items()},
                  "dags": dags, "heavy": heavy}))
"""


@pytest.fixture(scope="module")
def dagbag(tmp_path_factory: pytest.TempPathFactory) -> dict:
    # a fresh interpreter, so sys.modules shows exactly what parsing the DAG folder imported
    env = airflow_env(tmp_path_factory.mktemp("airflow"), smtp_port=2525)
    env.pop("KAFKA_RECON_CONFIG", None)
    out = subprocess.run([sys.executable, "-c", PROBE, str(REPO_ROOT / "dags")], env=env,
                         capture_output=True, text=True, check=True, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_dag_folder_has_no_import_errors(dagbag: dict) -> None:
    assert dagbag["errors"] == {}


def test_one_daily_dag_per_configured_flow(dagbag: dict) -> None:
    assert sorted(dagbag["dags"]) == ["recon__demo_orders"]
    dag = dagbag["dags"]["recon__demo_orders"]
    assert dag["tasks"] == ["notify", "reconcile", "replay", "report", "stage", "validate",
                            "verdict"]
    assert dag["catchup"] is False
    assert "flow:demo_orders" in dag["tags"]


def test_owners_and_retries_come_from_the_flow(dagbag: dict) -> None:
    dag = dagbag["dags"]["recon__demo_orders"]
    assert dag["owners"] == ["orders-team@example.com"]
    assert dag["retries"] == [2]


def test_parsing_imports_no_pyspark_pandas_or_great_expectations(dagbag: dict) -> None:
    assert dagbag["heavy"] == []


def test_dag_files_do_not_import_heavy_modules_at_top_level() -> None:
    for path in Path(REPO_ROOT / "dags").glob("*.py"):
        top = [line for line in path.read_text().splitlines()
               if line.startswith(("import ", "from "))]
        assert not [line for line in top if any(
            m in line for m in ("pyspark", "pandas", "great_expectations"))], path
