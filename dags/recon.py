"""One scheduled reconciliation DAG per flow of the flow config: `recon__<flow>`.

The data interval is the window: the run after midnight reconciles the day before it (or, with
the flow's `window: 1h`, each hour after it ends), once the window has closed (its end plus the
flow's grace and disorder margin: `wait_for_closing` defers until then). An ok window updates
the flow's Asset `kafka-recon://<flow>`. This file
only wires tasks (kafka_recon.airflow.wiring); parsing reads the flow config, a local YAML
file, and imports neither pyspark, pandas nor great_expectations. A flow whose config is wrong
gets no DAG here; `recon_config.py` names it as an import error, and every other flow still runs.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG
from airflow.timetables.interval import CronDataIntervalTimetable

from kafka_recon.airflow.macros import MACROS
from kafka_recon.airflow.names import flow_dag_id
from kafka_recon.airflow.run_args import RunArgs
from kafka_recon.airflow.wiring import daily_run, runs_in_flight
from kafka_recon.config import Flow, load_flows_partial, schedule_of
from kafka_recon.orchestrate import staged_tiers
from kafka_recon.settings import config_path, task_retries


def default_args(owner: str) -> dict[str, object]:
    return {
        "owner": owner,
        "retries": task_retries(),
        "retry_delay": timedelta(minutes=2),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=30),
    }


def build_dag(flow: Flow) -> DAG:
    with DAG(
        dag_id=flow_dag_id(flow.name),
        description=f"Daily reconciliation of flow {flow.name}",
        # a data-interval timetable (Airflow 3's plain "@daily" gives zero-width intervals),
        # one interval per window of the flow (1d unless it says 1h, 10m, ...)
        schedule=CronDataIntervalTimetable(str(schedule_of(flow.window)), timezone="UTC"),
        start_date=datetime(2026, 1, 1, tzinfo=UTC),
        catchup=False,
        # windows are runs of their own: one that waits, fails or retries never holds back the
        # next window (the run folder's claim already keeps two runs off one window)
        max_active_runs=runs_in_flight(flow),
        default_args=default_args(",".join(flow.owners)),
        tags=["kafka-recon", f"flow:{flow.name}", *flow.tags],
        user_defined_macros=MACROS,
        doc_md=__doc__,
    ) as dag:
        daily_run(RunArgs(flow=flow.name, start="{{ data_interval_start.isoformat() }}",
                          end="{{ data_interval_end.isoformat() }}",
                          config=str(config_path())), staged_tiers(flow))
    return dag


# the valid flows' DAGs; a bad flow is reported by recon_config.py as an import error
for _flow in load_flows_partial(config_path())[0].values():
    globals()[flow_dag_id(_flow.name)] = build_dag(_flow)
