"""DAG integrity and policy: the DagBag loads, ids are expected, every task renders, parsing
stays light, and the spark-submit command is what the snapshot says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.services.airflow import airflow_env
from kafka_recon.settings import REPO_ROOT

pytestmark = pytest.mark.unit

HERE = Path(__file__).parent
SNAPSHOT = HERE / "snapshots" / "spark_submit.json"


def _probe(tmp: Path, config: Path, extra: dict[str, str] | None = None) -> dict:
    # a fresh interpreter, so sys.modules shows exactly what parsing the DAG folder imported
    env = airflow_env(tmp, smtp_port=2525,
                      extra={"KAFKA_RECON_CONFIG": str(config), **(extra or {})})
    out = subprocess.run([sys.executable, str(HERE / "dag_probe.py"), str(REPO_ROOT / "dags")],
                         env=env, capture_output=True, text=True, check=True, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def dagbag(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return _probe(tmp_path_factory.mktemp("airflow"), HERE.parent.parent / "data" / "flows.yaml")


def test_dag_folder_has_no_import_errors(dagbag: dict) -> None:
    assert dagbag["errors"] == {}


def test_one_daily_dag_per_flow_plus_the_adhoc_and_snapshot_dags(dagbag: dict) -> None:
    assert sorted(dagbag["dags"]) == ["recon__clicks", "recon__demo", "recon__orders",
                                      "recon_adhoc", "recon_repair", "recon_snapshots"]


def test_daily_dag_is_a_chain_of_few_tasks_ending_with_the_verdict(dagbag: dict) -> None:
    dag = dagbag["dags"]["recon__orders"]
    # every tier and the topic staged in one task; a flow without alerts has no alert task
    assert dag["tasks"] == ["begin", "notify", "replay_reconcile", "report", "stage",
                            "verdict"]
    assert dag["schedule"] == "CronDataIntervalTimetable 0 0 * * *"
    assert dag["catchup"] is False
    down = dag["downstream"]
    # `begin` waits for the closing time, then clears the window's previous outputs, before
    # anything is staged
    assert down["begin"] == ["stage"] and down["stage"] == ["replay_reconcile"]
    # a tier that failed to stage keeps the Spark step from running
    assert dag["trigger_rules"]["replay_reconcile"] == "all_success"
    # after the Spark step, one task validates, reports and records the history
    assert down["replay_reconcile"] == ["report"]
    assert down["report"] == ["notify"] and down["notify"] == ["verdict"]
    # owners hear about failures too: report, notify and verdict run whatever the Spark
    # step did
    for t in ("report", "notify", "verdict"):
        assert dag["trigger_rules"][t] == "all_done", t


def test_a_flow_with_alerts_sends_them_beside_the_mail(dagbag: dict) -> None:
    dag = dagbag["dags"]["recon__clicks"]
    assert dag["downstream"]["report"] == ["alert", "notify"]
    assert dag["downstream"]["alert"] == ["verdict"]
    assert dag["trigger_rules"]["alert"] == "all_done"


def test_owners_tags_and_retries_come_from_the_flow(dagbag: dict) -> None:
    dag = dagbag["dags"]["recon__orders"]
    assert dag["owners"] == ["orders-team@example.com,dba@example.com"]
    assert dag["tags"] == ["flow:orders", "kafka-recon", "tier-1"]
    assert dag["retries"] == [2] and dag["retry_backoff"] == [True]
    assert dagbag["dags"]["recon__clicks"]["owners"] == ["web@example.com"]


def test_replays_of_one_cluster_wait_in_its_pool_and_nothing_else_does(dagbag: dict) -> None:
    for flow in ("orders", "clicks"):  # both read 127.0.0.1:9092: one pool bounds them both
        pools = dagbag["dags"][f"recon__{flow}"]["pools"]
        assert pools.pop("replay_reconcile") == "kafka_recon__127.0.0.1:9092"
        assert set(pools.values()) == {"default_pool"}
    assert dagbag["dags"]["recon_adhoc"]["pools"]["replay_reconcile"] == "kafka_recon__adhoc"


def test_windows_are_runs_of_their_own_with_room_for_every_one_still_waiting(dagbag: dict
                                                                             ) -> None:
    # one window's run that waits, fails or retries never holds back the next window's
    assert dagbag["dags"]["recon__orders"]["max_active_runs"] == 16
    assert dagbag["dags"]["recon__clicks"]["max_active_runs"] == 16


def test_a_grace_longer_than_many_windows_leaves_room_for_each_waiting_window() -> None:
    from datetime import timedelta

    from kafka_recon.airflow.wiring import runs_in_flight
    from tests.factories import flow

    clicks = flow("clicks")  # 10-minute windows
    slow = clicks.model_copy(update={"grace": timedelta(hours=3), "disorder": timedelta(0)})
    # 18 windows wait for their closing time at once, and a few more count
    assert runs_in_flight(slow) == 22
    assert runs_in_flight(clicks) == 16


def test_a_flows_window_sets_its_dags_schedule(dagbag: dict) -> None:
    assert dagbag["dags"]["recon__clicks"]["schedule"] == \
        "CronDataIntervalTimetable */10 * * * *"
    assert dagbag["dags"]["recon__orders"]["schedule"] == "CronDataIntervalTimetable 0 0 * * *"


def test_an_ok_window_updates_the_flows_asset_and_the_adhoc_dag_its_alias(dagbag: dict
                                                                         ) -> None:
    assert dagbag["dags"]["recon__orders"]["outlets"] == {
        "verdict": ["Asset kafka-recon://orders kafka-recon://orders/"]}
    assert dagbag["dags"]["recon_adhoc"]["outlets"] == {
        "verdict": ["AssetAlias kafka-recon-reconciled"]}


def test_adhoc_dag_asks_for_flow_window_replays_and_email(dagbag: dict) -> None:
    dag = dagbag["dags"]["recon_adhoc"]
    assert dag["params"] == ["email", "end", "flow", "replays", "start"]
    assert dag["schedule"].startswith("NullTimetable")
    # the form is checked, then the window waited for and the run begun, then it is staged
    assert dag["downstream"]["check"] == ["begin"]
    assert dag["downstream"]["begin"] == ["stage"]
    assert dag["upstream"]["replay_reconcile"] == ["stage"]
    # the flow is known only when the run starts: the alert task skips when it has none
    assert dag["downstream"]["report"] == ["alert", "notify"]


def test_every_reconciliation_waits_deferred_until_its_windows_closing_time(dagbag: dict
                                                                           ) -> None:
    """The closing time is the window's end plus the flow's grace and disorder margin: 10m
    and 5m by default, so the daily window ending 2026-11-21 00:00 is counted from 00:15."""
    daily = dagbag["dags"]["recon__orders"]["rendered"]["begin"]
    assert daily["target_time"] == "2026-11-21T00:15:00Z"
    adhoc = dagbag["dags"]["recon_adhoc"]["rendered"]["begin"]
    assert adhoc["target_time"] == "2026-11-20T06:15:00Z"
    assert dagbag["dags"]["recon__orders"]["deferrable"] == {"begin": True}


def test_snapshot_dag_runs_every_five_minutes_for_every_flow(dagbag: dict) -> None:
    # each flow's topic goes to the flight recorder, Flume tier or not
    dag = dagbag["dags"]["recon_snapshots"]
    assert dag["tasks"] == ["snapshot__clicks", "snapshot__demo", "snapshot__orders"]
    assert dag["schedule"] == "CronTriggerTimetable */5 * * * *"


def test_every_task_renders(dagbag: dict) -> None:
    errors = {f"{d}.{t}": r["render_error"] for d, dag in dagbag["dags"].items()
              for t, r in dag["rendered"].items() if "render_error" in r}
    assert errors == {}
    adhoc = dagbag["dags"]["recon_adhoc"]["rendered"]
    assert adhoc["stage"]["op_kwargs"] == {
        "flow": "orders", "start": "2026-11-20T00:00:00Z", "end": "2026-11-20T06:00:00Z"}
    assert adhoc["notify"]["op_kwargs"]["email"] == "True"


def test_repair_dag_plans_asks_an_owner_and_delivers_only_the_approved_plan(dagbag: dict
                                                                           ) -> None:
    dag = dagbag["dags"]["recon_repair"]
    assert dag["params"] == ["end", "flow", "start"]
    assert dag["downstream"] == {"repair_folder": ["repair_plan"],
                                 "repair_plan": ["repair_summary"],
                                 "repair_summary": ["approve"], "approve": ["repair_deliver"],
                                 "repair_deliver": ["settle"], "settle": ["verify"],
                                 "verify": []}
    rendered = dag["rendered"]
    assert rendered["approve"]["subject"] == (
        "Re-deliver the lost records of orders, 2026-11-20T00:00:00Z to 2026-11-20T06:00:00Z?")
    assert rendered["approve"]["body"].startswith("- **topic->sink** (consume side)")
    plan = rendered["repair_plan"]["spark_submit"]
    deliver = rendered["repair_deliver"]["spark_submit"]
    for flag, value in (("--flow", "orders"), ("--start", "2026-11-20T00:00:00Z"),
                        ("--end", "2026-11-20T06:00:00Z"), ("--out", "/runs/FLOW/WINDOW")):
        assert plan[plan.index(flag) + 1] == deliver[deliver.index(flag) + 1] == value
    assert any(a.endswith("jobs/repair_plan.py") for a in plan)
    assert any(a.endswith("jobs/repair_deliver.py") for a in deliver)
    assert deliver[deliver.index("--plan") + 1] == "d" * 64, "the digest the approver saw"
    # verified: the window reconciled again by the ad-hoc DAG, after the flow's settle time
    assert rendered["verify"]["trigger_dag_id"] == "recon_adhoc"
    assert rendered["verify"]["conf"] == {"flow": "orders", "start": "2026-11-20T00:00:00Z",
                                          "end": "2026-11-20T06:00:00Z", "replays": 2,
                                          "email": True}
    assert rendered["settle"]["target_time"].endswith("Z")


def _normalized(cmd: list[str]) -> list[str]:
    out = []
    for arg in cmd:
        if arg.endswith(".jar"):  # the --jars list: names only, the folder differs per clone
            arg = ",".join(sorted(Path(j).name for j in arg.split(",")))
        out.append(arg.replace(str(REPO_ROOT), "<repo>"))
    return out


def test_rendered_spark_submit_commands_match_the_snapshot(dagbag: dict) -> None:
    got = {f"{d}.{t}": _normalized(dagbag["dags"][d]["rendered"][t]["spark_submit"])
           for d in ("recon__orders", "recon_adhoc") for t in ("replay_reconcile",)}
    if os.environ.get("KAFKA_RECON_UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(json.dumps(got, indent=2) + "\n")
    assert got == json.loads(SNAPSHOT.read_text()), (
        "the spark-submit command changed; if on purpose, re-run with "
        "KAFKA_RECON_UPDATE_SNAPSHOTS=1 and review the diff")


def test_parsing_imports_no_pyspark_pandas_or_great_expectations(dagbag: dict) -> None:
    assert dagbag["heavy"] == []


def test_dag_files_do_not_import_heavy_modules_at_top_level() -> None:
    for path in Path(REPO_ROOT / "dags").glob("*.py"):
        top = [line for line in path.read_text().splitlines()
               if line.startswith(("import ", "from "))]
        assert not [line for line in top if any(
            m in line for m in ("pyspark", "pandas", "great_expectations"))], path


@pytest.mark.parametrize("dag_id", ["recon__orders", "recon_repair"])
def test_a_tasks_own_process_builds_only_the_dag_it_runs(tmp_path: Path, dag_id: str) -> None:
    # Airflow names the task's DAG in the parsing context of the process that runs it
    bag = _probe(tmp_path, HERE.parent.parent / "data" / "flows.yaml",
                 {"_AIRFLOW_PARSING_CONTEXT_DAG_ID": dag_id,
                  "_AIRFLOW_PARSING_CONTEXT_TASK_ID": "begin"})
    assert bag["errors"] == {} and sorted(bag["dags"]) == [dag_id]


def test_one_bad_flow_keeps_the_other_dags_and_shows_as_an_import_error_naming_it(
        tmp_path: Path) -> None:
    good = (HERE.parent.parent / "data" / "flows.yaml").read_text()
    bad = good + """
  broken:
    owners: [x@example.com]
    record: {id: "order_id", event_time: "$.t"}
    tiers:
      - {name: only_topic, type: kafka, bootstrap: "127.0.0.1:9092", topic: t}
"""
    config = tmp_path / "flows.yaml"
    config.write_text(bad)
    bag = _probe(tmp_path, config)
    assert sorted(bag["dags"]) == ["recon__clicks", "recon__demo", "recon__orders",
                                   "recon_adhoc", "recon_repair", "recon_snapshots"]
    assert "broken" not in bag["dags"]["recon_adhoc"]["params_enum"]["flow"]
    [(path, error)] = bag["errors"].items()
    assert path.endswith("recon_config.py")
    assert "flow 'broken'" in error and "record.id" in error and "tiers" in error


def test_an_unreadable_flow_config_is_one_import_error_naming_the_file(tmp_path: Path) -> None:
    config = tmp_path / "flows.yaml"
    config.write_text("flows: [not, a, mapping]\n")
    bag = _probe(tmp_path, config)
    assert sorted(bag["dags"]) == ["recon_adhoc"]
    [(path, error)] = bag["errors"].items()
    assert path.endswith("recon_config.py") and str(config) in error


def test_a_missing_flow_config_is_one_import_error_saying_where_it_was_looked_for(
        tmp_path: Path) -> None:
    config = tmp_path / "nowhere" / "flows.yaml"
    bag = _probe(tmp_path, config)
    assert sorted(bag["dags"]) == ["recon_adhoc"]
    [(path, error)] = bag["errors"].items()
    assert path.endswith("recon_config.py")
    assert f"no flow config at {config} (from KAFKA_RECON_CONFIG)" in error


def test_a_flow_reading_a_delta_table_submits_with_the_lake_jars_and_deltas_settings(
        tmp_path: Path) -> None:
    config = tmp_path / "flows.yaml"
    config.write_text("""
flows:
  lake:
    owners: [x@example.com]
    record: {id: "$.id", event_time: "$.ts"}
    tiers:
      - {name: topic, type: kafka, bootstrap: "127.0.0.1:9092", topic: t}
      - {name: lake, type: table, format: delta, table: /data/orders}
""")
    bag = _probe(tmp_path, config)
    cmd = bag["dags"]["recon__lake"]["rendered"]["replay_reconcile"]["spark_submit"]
    jars = {Path(j).name for j in cmd[cmd.index("--jars") + 1].split(",")}
    assert {"delta-spark_2.13-4.0.0.jar", "kafka-recon-reader.jar"} <= jars
    assert any(j.startswith("iceberg-spark-runtime") for j in jars)
    assert "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension" in cmd
