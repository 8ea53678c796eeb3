"""One daily reconciliation DAG per flow of the flow config: `recon__<flow>`.

The data interval is the window: the run after midnight reconciles the day before it. This file
only wires tasks (kafka_recon.dag_tasks); parsing reads the flow config, a local YAML file, and
imports neither pyspark, pandas nor great_expectations.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG
from airflow.timetables.interval import CronDataIntervalTimetable

from kafka_recon.config import Flow, load_flows
from kafka_recon.dag_tasks import RunArgs, daily_run, spark_jars
from kafka_recon.pipeline import config_path, staged_tiers


def default_args(owner: str) -> dict[str, object]:
    return {
        "owner": owner,
        "retries": int(os.environ.get("KAFKA_RECON_TASK_RETRIES", "2")),
        "retry_delay": timedelta(minutes=2),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=30),
    }


def build_dag(flow: Flow) -> DAG:
    with DAG(
        dag_id=f"recon__{flow.name}",
        description=f"Daily reconciliation of flow {flow.name}",
        # a data-interval timetable (Airflow 3's plain "@daily" gives zero-width intervals)
        schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
        start_date=datetime(2026, 1, 1, tzinfo=UTC),
        catchup=False,
        max_active_runs=1,
        default_args=default_args(",".join(flow.owners)),
        tags=["kafka-recon", f"flow:{flow.name}", *flow.tags],
        user_defined_macros={"kafka_recon_spark_jars": spark_jars},
        doc_md=__doc__,
    ) as dag:
        daily_run(RunArgs(flow=flow.name, start="{{ data_interval_start.isoformat() }}",
                          end="{{ data_interval_end.isoformat() }}",
                          config=str(config_path())), staged_tiers(flow))
    return dag


for _flow in load_flows(config_path()).values():
    globals()[f"recon__{_flow.name}"] = build_dag(_flow)
