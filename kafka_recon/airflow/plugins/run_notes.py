"""Ad-hoc and repair runs named by their flow and window: a listener in the scheduler gives a
`recon_adhoc` or `recon_repair` run that has no note one ("demo_orders 2026-12-05T00:00:00Z –
2026-12-06T00:00:00Z", from its conf), so Airflow's list of runs says which flow and window
each reconciled, not only when it was triggered (`manual__<time>`). The Reconciliation page's
own buttons name the run itself (`rerun__<flow>__<window>__<time>`) and give it a note."""

from __future__ import annotations

import logging
from typing import Any

from airflow.listeners import hookimpl

log = logging.getLogger(__name__)

NAMED = ("recon_adhoc", "recon_repair")


def note_of(conf: dict[str, Any] | None) -> str | None:
    """'<flow> <start> – <end>' from a run's conf, or None when it does not name them."""
    conf = conf or {}
    if not all(isinstance(conf.get(k), str) and conf[k] for k in ("flow", "start", "end")):
        return None
    return f"{conf['flow']} {conf['start']} – {conf['end']}"


@hookimpl
def on_dag_run_running(dag_run: Any, msg: str) -> None:
    try:
        if dag_run.dag_id not in NAMED or dag_run.note:
            return
        note = note_of(dag_run.conf)
        if note:
            dag_run.note = note  # in the scheduler's own transaction, as the pools are made
    except Exception:  # a listener must never break the scheduler
        log.exception("kafka-recon: the run's note was not set")
