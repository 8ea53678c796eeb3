"""The replays' pools, made on first use: a listener in the scheduler, where a DAG run starts.

Airflow never schedules a task whose pool does not exist, and says so only in the scheduler's
log; tasks (Airflow 3) cannot write to the metadata database, and DAG files must not. So when a
kafka-recon DAG run starts, the scheduler makes any `kafka_recon__*` pool its tasks name that is
missing, with `[kafka_recon] replay_slots` slots (`KAFKA_RECON_REPLAY_SLOTS`, default 2), in the
scheduler's own transaction (a second connection could wait on SQLite's lock for ever), by one
statement that skips a pool already there. A pool that exists is left as it is: an
administrator's size in Admin > Pools wins over the default.
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
    """Add the pools of `names` that do not exist; returns those it added.

    One statement that skips a pool already there (ON CONFLICT DO NOTHING, INSERT IGNORE),
    executed at once in the scheduler's transaction: an added object would be flushed only
    later, when two runs starting in one scheduler loop (or two schedulers) would both have
    added it, and the duplicate would fail the scheduler's whole transaction."""
    from airflow.models.pool import Pool
    from sqlalchemy import insert, select
    from sqlalchemy.dialects import mysql, postgresql, sqlite

    have = set(session.scalars(select(Pool.pool).where(Pool.pool.in_(names))))
    made = sorted(names - have)
    if not made:
        return []
    rows = [{"pool": name, "slots": slots, "include_deferred": False,
             "description": "kafka-recon: replays of one Kafka cluster at once (made on first "
                            "use; resize it here)"} for name in made]
    table = Pool.__table__
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        stmt: Any = postgresql.insert(table).values(rows).on_conflict_do_nothing(
            index_elements=["pool"])
    elif dialect == "sqlite":
        stmt = sqlite.insert(table).values(rows).on_conflict_do_nothing()
    elif dialect in ("mysql", "mariadb"):
        stmt = mysql.insert(table).values(rows).prefix_with("IGNORE")
    else:
        stmt = insert(table).values(rows)
    # no savepoint around it: the scheduler's session refuses any commit, a savepoint's too
    session.execute(stmt)
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
        slots = replay_slots()
        for name in make_missing(session, names, slots):
            log.info("kafka-recon: made pool %s with %d slots", name, slots)
    except Exception:  # a listener must never break the scheduler
        log.exception("kafka-recon: the replays' pools were not made")
