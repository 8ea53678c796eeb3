"""The names kafka-recon gives things in Airflow, spelled once: the DAG files build them and the
Reconciliation page asks Airflow's auth manager about them."""

from __future__ import annotations

FLOW_DAG_PREFIX = "recon__"


def flow_dag_id(flow: str) -> str:
    """The scheduled DAG of a flow: whoever may read it may read the flow's results."""
    return f"{FLOW_DAG_PREFIX}{flow}"
