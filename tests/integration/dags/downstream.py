"""Downstream DAGs of the end-to-end test: each runs when its flow's window is reconciled ok
(the Asset kafka-recon://<flow>), as a team's own DAG would. Not shipped: a DAG bundle of the
test's Airflow only."""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import DAG, Asset, task

for _flow in ("demo_orders", "demo_hourly"):
    with DAG(dag_id=f"after_{_flow}", schedule=[Asset(f"kafka-recon://{_flow}")],
             start_date=datetime(2026, 1, 1, tzinfo=UTC), catchup=False,
             tags=["kafka-recon-test"]) as _dag:

        @task
        def use_the_data() -> str:
            return "the window is whole"

        use_the_data()
    globals()[_dag.dag_id] = _dag
