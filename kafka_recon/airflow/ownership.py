"""Which DAG run a task belongs to, and the run folder it holds: every task after `begin` goes on
only while its run holds the window's folder (kafka_recon.runfolder)."""

from __future__ import annotations

from typing import Any


def run_owner(context: Any = None) -> str:
    """This DAG run, as the run folder's owner: `<dag_id>/<run_id>`."""
    if context is None:
        from airflow.sdk import get_current_context

        context = get_current_context()
    return f"{context['dag'].dag_id}/{context['run_id']}"


def held_run(flow: str, start: str, end: str) -> Any:
    """The run, once this DAG run is known to hold its folder."""
    from kafka_recon import orchestrate

    run = orchestrate.load(flow, start, end)
    orchestrate.check_owner(run, run_owner())
    return run
