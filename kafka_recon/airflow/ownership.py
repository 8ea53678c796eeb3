"""Which DAG run a task belongs to, and the window it holds: every task after `begin` goes on
only while its run holds the window's lease (kafka_recon.stores.lease), which the task renews
while it runs."""

from __future__ import annotations

from typing import Any


def run_owner(context: Any = None) -> str:
    """This DAG run, as the run folder's owner: `<dag_id>/<run_id>`."""
    if context is None:
        from airflow.sdk import get_current_context

        context = get_current_context()
    return f"{context['dag'].dag_id}/{context['run_id']}"


def held_run(flow: str, start: str, end: str) -> Any:
    """The run, once this DAG run is known to hold its window; the lease is renewed for as long
    as the task's process runs."""
    from kafka_recon import orchestrate

    return hold(orchestrate.load(flow, start, end), run_owner())


def hold(run: Any, owner: str) -> Any:
    """Go on only while `owner` holds `run`'s window; renew its lease for as long as the task's
    process runs."""
    from kafka_recon import orchestrate

    orchestrate.check_owner(run, owner)
    orchestrate.lease(run).keep_alive(owner)
    return run
