"""Which connections are staged through their provider's hook, and the engine built on it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kafka_recon.sources import hooks

pytestmark = pytest.mark.unit


def _airflow_holds(monkeypatch: pytest.MonkeyPatch, **fields: Any) -> None:
    from airflow.models.connection import Connection

    conn = Connection(conn_id="c", **fields)
    # found where only kafka-recon's lookup sees it (a hook's own lookup by id, through the
    # task SDK, does not read the metadata database outside a task): the hook gets it as found
    monkeypatch.setattr(hooks, "_airflow_connection", lambda _id: conn)
    monkeypatch.delenv("AIRFLOW_CONN_C", raising=False)


def test_a_postgres_connection_gets_postgreshooks_dialect_and_its_password_hidden(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _airflow_holds(monkeypatch, conn_type="postgres", host="db", port=5433, schema="dw",
                   login="u", password="s3cret", extra=json.dumps({"sslmode": "require"}))
    hooked = hooks.hook_engine("c")
    assert hooked is not None and hooked.hook == "PostgresHook"
    assert hooked.engine.dialect.name == "postgresql"
    assert "s3cret" not in hooked.url and hooked.url.endswith("@db:5433/dw")


def test_a_mysql_connection_gets_the_dialect_of_its_client(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _airflow_holds(monkeypatch, conn_type="mysql", host="db", schema="dw", login="u",
                   extra=json.dumps({"client": "mysql-connector-python"}))
    hooked = hooks.hook_engine("c")
    assert hooked is not None and hooked.hook == "MySqlHook"
    assert (hooked.engine.dialect.name, hooked.engine.dialect.driver) == (
        "mysql", "mysqlconnector")


@pytest.mark.parametrize("conn_type", ["http", "no_such_type"])
def test_a_type_without_a_sql_provider_hook_is_left_to_the_dialect_rows(
        monkeypatch: pytest.MonkeyPatch, conn_type: str) -> None:
    _airflow_holds(monkeypatch, conn_type=conn_type, host="h")
    assert hooks.hook_engine("c") is None


def test_a_url_or_a_connection_handed_to_spark_never_asks_airflow(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def asked(_id: str) -> None:
        raise AssertionError("Airflow was asked")

    monkeypatch.setattr(hooks, "_airflow_connection", asked)
    monkeypatch.setenv("KAFKA_RECON_CONN_UP", "postgresql://u@h/d")
    assert hooks.hook_engine("postgresql://u@h/d") is None
    assert hooks.hook_engine("up") is None


class _Conn:
    """A DB-API connection whose attribute says how its cursors shape rows."""


@pytest.mark.parametrize("attr,module,expected", [
    ("row_factory", "psycopg", "tuple_row"),
    ("cursor_factory", "psycopg2", "cursor"),
    ("cursorclass", "MySQLdb", "Cursor"),
    ("cursorclass", "pymysql", "Cursor")])
def test_staging_reads_plain_rows_whatever_cursor_the_connection_chose(
        attr: str, module: str, expected: str) -> None:
    import importlib

    driver = importlib.import_module(module)
    importlib.import_module(f"{module}.{'rows' if module == 'psycopg' else 'cursors'}"
                            if module != "psycopg2" else "psycopg2.extensions")
    conn = type("Conn", (_Conn,), {"__module__": f"{module}.connection"})()
    setattr(conn, attr, "a dict-returning choice")
    hooks._plain_rows(conn)
    assert getattr(getattr(conn, attr), "__name__", None) == expected
    assert driver is not None
