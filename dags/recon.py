"""One daily reconciliation DAG per flow of the flow config: `recon__<flow>`.

This file only wires tasks. The steps live in kafka_recon.pipeline; the replay runs as a Spark
job through SparkSubmitOperator. Parsing reads the flow config (a local YAML file) and imports
neither pyspark, pandas nor great_expectations.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime, timedelta

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG, TriggerRule, task
from airflow.timetables.interval import CronDataIntervalTimetable

from kafka_recon.config import Flow, load_flows
from kafka_recon.paths import REPO_ROOT
from kafka_recon.pipeline import config_path
from kafka_recon.sparkutil import SMALL_DATA_CONF, UTC_CONF

WINDOW = {"start": "{{ data_interval_start.isoformat() }}",
          "end": "{{ data_interval_end.isoformat() }}"}


def _spark_jars() -> str:
    # resolved when the task renders, not at parse time: listing .jars is I/O
    from kafka_recon.paths import spark_jars

    return ",".join(spark_jars())


def build_dag(flow: Flow) -> DAG:
    config = str(config_path())
    with DAG(
        dag_id=f"recon__{flow.name}",
        description=f"Daily reconciliation of flow {flow.name}",
        # a data-interval timetable: the run after midnight reconciles the day before it
        # (Airflow 3's plain "@daily" gives zero-width intervals)
        schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
        start_date=datetime(2026, 1, 1, tzinfo=UTC),
        catchup=False,
        max_active_runs=1,
        default_args={
            "owner": ",".join(flow.owners),
            "retries": int(os.environ.get("KAFKA_RECON_TASK_RETRIES", "2")),
            "retry_delay": timedelta(minutes=2),
            "retry_exponential_backoff": True,
            "max_retry_delay": timedelta(minutes=30),
        },
        tags=["kafka-recon", f"flow:{flow.name}"],
        user_defined_macros={"kafka_recon_spark_jars": _spark_jars},
        doc_md=__doc__,
    ) as dag:

        @task
        def stage(start: str, end: str) -> str:
            from kafka_recon import pipeline

            f, window, out = pipeline.load(flow.name, start, end)
            pipeline.stage(f, window, out)
            return str(out)

        def spark_job(step: str) -> SparkSubmitOperator:
            return SparkSubmitOperator(
                task_id=step,
                conn_id="spark_default",
                application=str(REPO_ROOT / "spark_jobs" / f"{step}.py"),
                name=f"kafka-recon-{step}-{flow.name}",
                jars="{{ kafka_recon_spark_jars() }}",
                conf={**UTC_CONF, **SMALL_DATA_CONF},
                env_vars={"PYSPARK_PYTHON": sys.executable,
                          "PYSPARK_DRIVER_PYTHON": sys.executable},
                application_args=["--config", config, "--flow", flow.name,
                                  "--start", WINDOW["start"], "--end", WINDOW["end"],
                                  "--out", "{{ ti.xcom_pull(task_ids='stage') }}"],
            )

        replay, reconciled = spark_job("replay"), spark_job("reconcile")

        @task
        def validate(start: str, end: str) -> bool:
            from kafka_recon import pipeline

            f, _, out = pipeline.load(flow.name, start, end)
            summary = pipeline.validate(f, out)
            if not summary["success"]:
                failed = {k: v["failed"] for k, v in summary["suites"].items() if v["failed"]}
                raise RuntimeError(f"Great Expectations validation failed: {failed}")
            return True

        @task(trigger_rule=TriggerRule.ALL_DONE)
        def report(start: str, end: str) -> dict[str, str]:
            from kafka_recon import pipeline

            _, _, out = pipeline.load(flow.name, start, end)
            return pipeline.report(out)

        @task(trigger_rule=TriggerRule.ALL_DONE)
        def notify(start: str, end: str) -> str:
            from kafka_recon import pipeline

            f, _, out = pipeline.load(flow.name, start, end)
            return pipeline.notify(f, out)

        @task(trigger_rule=TriggerRule.ALL_DONE)
        def verdict(start: str, end: str) -> str:
            """Ends the run red when the flow is not ok, after owners have been told."""
            from kafka_recon import pipeline
            from kafka_recon.reconcile import verdict as one_line
            from kafka_recon.report import load_json

            _, _, out = pipeline.load(flow.name, start, end)
            result = load_json(out / "result.json")
            line = one_line(result)
            if result["status"] != "ok":
                raise RuntimeError(line)
            return line

        staged = stage(**WINDOW)
        validated = validate(**WINDOW)
        reported = report(**WINDOW)
        notified = notify(**WINDOW)
        staged >> replay >> reconciled >> validated >> reported >> notified >> verdict(**WINDOW)
    return dag


for _flow in load_flows(config_path()).values():
    globals()[f"recon__{_flow.name}"] = build_dag(_flow)
