"""`recon_snapshots`: every five minutes, one snapshot of each flow's Flume counters and of its
topic's partitions and production groups (the flight recorder).

A Flume tier is counted from the growth of its counters between the snapshots that bracket a
window (kafka_recon.sources.flume), and a finding's cause is read from what the recorder saw
during the window (kafka_recon.cluster.recorder): both need snapshots taken while the window
runs. One task per flow.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG, task

from kafka_recon.config import load_flows_partial
from kafka_recon.settings import config_path

FLOWS = sorted(load_flows_partial(config_path())[0])

if FLOWS:  # a config that cannot be read is recon_config's import error, not a DAG's
    with DAG(
        dag_id="recon_snapshots",
        description="Snapshot each flow's Flume counters and its topic's leaders, ISR, offsets and "
                    "groups",
        schedule="*/5 * * * *",
        start_date=datetime(2026, 1, 1, tzinfo=UTC),
        catchup=False,
        max_active_runs=1,
        # a missed snapshot only widens the bracket; a late retry is worse than the next run
        default_args={"owner": "kafka-recon", "retries": 1,
                      "retry_delay": timedelta(seconds=30),
                      "execution_timeout": timedelta(minutes=2)},
        tags=["kafka-recon", "snapshots"],
        doc_md=__doc__,
    ) as dag:

        @task
        def snapshot(flow: str) -> list[dict[str, object]]:
            from kafka_recon.cluster.snapshots import take_snapshots
            from kafka_recon.config import load_flow
            from kafka_recon.errors import SourceUnreadable

            taken, errors = take_snapshots({flow: load_flow(config_path(), flow)})
            if errors:  # what could be taken is kept; the task still goes red
                raise SourceUnreadable("; ".join(errors))
            return taken

        for _name in FLOWS:
            snapshot.override(task_id=f"snapshot__{_name}")(_name)
