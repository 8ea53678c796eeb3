"""The names kafka-recon gives things in Airflow, spelled once: the DAG files build them and the
Reconciliation page asks Airflow's auth manager about them."""

from __future__ import annotations

FLOW_DAG_PREFIX = "recon__"


def flow_dag_id(flow: str) -> str:
    """The scheduled DAG of a flow: whoever may read it may read the flow's results."""
    return f"{FLOW_DAG_PREFIX}{flow}"


POOL_PREFIX = "kafka_recon__"
ADHOC_POOL = f"{POOL_PREFIX}adhoc"


def replay_pool(cluster: str) -> str:
    """The Airflow pool the replays of one Kafka cluster share (its connection id, else its
    bootstrap servers): midnight does not start every flow's full-window read on it at once."""
    return f"{POOL_PREFIX}{cluster}"[:256]  # Airflow's pool names are at most 256 characters
