"""`recon_flume_snapshots`: every five minutes, one snapshot of each Flume agent's counters.

A Flume tier is counted from the growth of its counters between the snapshots that bracket a
window (kafka_recon.sources.flume), so they must be taken while the window runs. One task per
flow with a Flume tier; the DAG exists only when some flow has one.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG, task

from kafka_recon.config import FlumeTier, load_flows_partial
from kafka_recon.settings import config_path

FLUME_FLOWS = sorted(name for name, f in load_flows_partial(config_path())[0].items()
                     if any(isinstance(t, FlumeTier) for t in f.tiers))

if FLUME_FLOWS:
    with DAG(
        dag_id="recon_flume_snapshots",
        description="Snapshot the Flume agents' counters for the flows that have them",
        schedule="*/5 * * * *",
        start_date=datetime(2026, 1, 1, tzinfo=UTC),
        catchup=False,
        max_active_runs=1,
        # a missed snapshot only widens the bracket; a late retry is worse than the next run
        default_args={"owner": "kafka-recon", "retries": 1,
                      "retry_delay": timedelta(seconds=30),
                      "execution_timeout": timedelta(minutes=2)},
        tags=["kafka-recon", "flume"],
        doc_md=__doc__,
    ) as dag:

        @task
        def snapshot(flow: str) -> list[dict[str, object]]:
            from kafka_recon.config import load_flow
            from kafka_recon.sources.flume import take_snapshots

            return take_snapshots({flow: load_flow(config_path(), flow)})

        for _name in FLUME_FLOWS:
            snapshot.override(task_id=f"snapshot__{_name}")(_name)
