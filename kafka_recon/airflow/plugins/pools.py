"""The replays' pools, made on first use: a listener in the scheduler, where a DAG run starts.

Airflow never schedules a task whose pool does not exist, and says so only in the scheduler's
log; tasks (Airflow 3) cannot write to the metadata database, and DAG files must not. So when a
kafka-recon DAG run starts, the scheduler makes any `kafka_recon__*` pool its tasks name that is
missing, with `[kafka_recon] replay_slots` slots (`KAFKA_RECON_REPLAY_SLOTS`, default 2), in the
scheduler's own transaction. A pool that exists is left as it is: an administrator's size in
Admin > Pools wins over the default.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.listeners import hookimpl

from kafka_recon.airflow.names import POOL_PREFIX

log = logging.getLogger(__name__)


def needed_pools(dag: Any) -> set[str]:
    """The kafka-recon pools a DAG's tasks wait in."""
    return {t.pool for t in getattr(dag, "tasks", ()) if (t.pool or "").startswith(POOL_PREFIX)}


def make_missing(session: Any, names: set[str], slots: int) -> list[str]:
    """Add the pools of `names` that do not exist; returns those it added."""
    from airflow.models.pool import Pool
    from sqlalchemy import select

    have = set(session.scalars(select(Pool.pool).where(Pool.pool.in_(names))))
    made = sorted(names - have)
    for name in made:
        session.add(Pool(pool=name, slots=slots, include_deferred=False,
                         description="kafka-recon: replays of one Kafka cluster at once "
                                     "(made on first use; resize it here)"))
    return made


@hookimpl
def on_dag_run_running(dag_run: Any, msg: str) -> None:
    try:
        names = needed_pools(getattr(dag_run, "dag", None))
        if not names:
            return
        from sqlalchemy.orm import object_session

        from kafka_recon.settings import replay_slots

        session = object_session(dag_run)
        if session is None:
            log.warning("kafka-recon: cannot make pools %s: the DAG run has no session", names)
            return
        for name in make_missing(session, names, replay_slots()):
            log.info("kafka-recon: made pool %s with %d slots", name, replay_slots())
    except Exception:  # a listener must never break the scheduler
        log.exception("kafka-recon: the replays' pools were not made")
