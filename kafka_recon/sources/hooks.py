"""A SQL tier staged through its Airflow connection's own provider hook.

Where Airflow holds the connection (inside a task, or on a host where Airflow is deployed),
staging connects the way every other task of the deployment does: through the hook of the
connection's type (common-sql's `DbApiHook`: PostgresHook, MySqlHook, MsSqlHook, ...). The hook
opens the DB-API connection with everything its provider reads from the connection: TLS modes
and certificates, options, a `client` or `cursor` choice, IAM tokens. kafka-recon only wraps
it in an SQLAlchemy engine of the hook's own dialect (so the window binds as that driver
expects) and puts the session in UTC where it has a row for the database
(`kafka_recon.sources.dialects`).

So any database with an Airflow provider stages (`counts:` and the check and count of `ids:`);
Spark's JDBC read of an `ids:` tier still needs a row in the dialect table. Without a provider
for the type, or outside Airflow, a connection becomes a URL by its row as before
(`kafka_recon.sources.connections`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from kafka_recon.errors import ConnectionUnusable
from kafka_recon.settings import conn_env_var
from kafka_recon.sources.dialects import known


@dataclass(frozen=True)
class HookEngine:
    engine: Any  # sqlalchemy Engine over the hook's connections
    url: str  # the hook's URL, password hidden: for messages
    hook: str  # the hook's class name


def _airflow_connection(conn_id: str) -> Any | None:
    """The connection as Airflow holds it here, or None (not Airflow's, or not known to it)."""
    from kafka_recon.settings import airflow_deployed
    from kafka_recon.sources.connections import in_airflow_task

    try:
        if in_airflow_task():
            from airflow.sdk import BaseHook

            return BaseHook.get_connection(conn_id)
        if airflow_deployed():
            from airflow.models.connection import Connection

            return Connection.get_connection_from_secrets(conn_id)
    except Exception:  # not found: the URL path names what is missing
        return None
    return None


def provider_hook(conn_id: str) -> Any | None:
    """The connection's DbApiHook, if Airflow holds the connection and has a SQL provider for
    its type; None otherwise (a URL, a connection handed to a Spark job, no provider)."""
    if "://" in conn_id or os.environ.get(conn_env_var(conn_id)):
        return None
    conn = _airflow_connection(conn_id)
    if conn is None:
        return None
    try:
        from airflow.providers.common.sql.hooks.sql import DbApiHook

        hook = conn.get_hook()
    except Exception:  # no provider installed for the type (or no common-sql): by our rows
        return None
    if not isinstance(hook, DbApiHook):
        return None
    # the connection as found here: a hook would look it up again by id through the task
    # SDK, which outside a task does not read Airflow's metadata database (and DbApiHook's
    # setter looks it up to compare)
    hook._connection = conn
    return hook


def _dialect_url(conn_id: str, hook: Any) -> Any:
    """The hook's SQLAlchemy URL: its dialect and driver are those of the DB-API connections
    the hook opens (psycopg or psycopg2, mysqlclient or mysql-connector, ...)."""
    from sqlalchemy.engine import make_url

    try:
        try:
            return hook.sqlalchemy_url
        except NotImplementedError:
            return make_url(hook.get_uri())
    except Exception as exc:
        raise ConnectionUnusable(f"connection '{conn_id}': {type(hook).__name__} gives no "
                                 f"SQLAlchemy URL: {str(exc).splitlines()[0]}") from None


def hook_engine(conn_id: str) -> HookEngine | None:
    """An engine whose every connection is the hook's own `get_conn()`, or None when the
    connection is not staged through a hook (see the module's docstring)."""
    hook = provider_hook(conn_id)
    if hook is None:
        return None
    from sqlalchemy import create_engine, event
    from sqlalchemy.pool import NullPool

    url = _dialect_url(conn_id, hook)
    if url.get_backend_name() == "sqlite":  # sqlite3 would create a missing file: by its row
        return None
    try:
        # the URL names the dialect only: the hook connects, with the connection's extras
        engine = create_engine(url.set(query={}), creator=hook.get_conn, poolclass=NullPool)
    except Exception as exc:  # a dialect whose driver is not installed
        raise ConnectionUnusable(f"connection '{conn_id}': {type(hook).__name__}: "
                                 f"{str(exc).splitlines()[0]}") from None
    row = known(url.get_backend_name())
    statement = row.utc if row is not None else None

    # first: the dialect's own first-connect queries (server version, ...) read rows too
    @event.listens_for(engine, "connect", insert=True)
    def _session(dbapi_conn: Any, _record: Any) -> None:
        _plain_rows(dbapi_conn)
        if statement:
            cur = dbapi_conn.cursor()
            try:
                cur.execute(statement)
            finally:
                cur.close()
            dbapi_conn.commit()  # a SET inside a transaction that is rolled back is undone

    return HookEngine(engine, url.render_as_string(hide_password=True), type(hook).__name__)


def _plain_rows(dbapi_conn: Any) -> None:
    """Rows as tuples on staging's own connection, whatever `cursor` the connection's extra
    chose for other tasks (PostgresHook's dictcursor or realdictcursor, MySqlHook's dictcursor
    or sscursor): SQLAlchemy reads a row by position, and a server-side cursor would hold the
    session. The drivers' own defaults, by the attribute each keeps its choice in."""
    import sys

    driver = sys.modules.get(type(dbapi_conn).__module__.split(".")[0])
    if hasattr(dbapi_conn, "row_factory") and hasattr(driver, "rows"):  # psycopg 3
        dbapi_conn.row_factory = driver.rows.tuple_row  # type: ignore[union-attr]
    elif hasattr(dbapi_conn, "cursor_factory"):  # psycopg2
        import psycopg2.extensions

        dbapi_conn.cursor_factory = psycopg2.extensions.cursor
    elif hasattr(dbapi_conn, "cursorclass") and hasattr(driver, "cursors"):  # MySQLdb, PyMySQL
        dbapi_conn.cursorclass = driver.cursors.Cursor  # type: ignore[union-attr]
