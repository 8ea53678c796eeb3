"""A tier's `conn:`: a URL, an Airflow connection in URI or JSON form, or handed to Spark."""

from __future__ import annotations

import json

import pytest

from kafka_recon.errors import ConnectionUnusable
from kafka_recon.sources.connections import redact, resolve, resolved_for_spark, secrets_of

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AIRFLOW_CONN_SINK_DB", "KAFKA_RECON_CONN_SINK_DB"):
        monkeypatch.delenv(var, raising=False)


def test_a_url_is_used_as_it_is_with_postgres_spelled_for_the_shipped_driver() -> None:
    assert resolve("sqlite:////data/up.db") == "sqlite:////data/up.db"
    assert resolve("postgres://u:p@db:5432/x") == "postgresql+psycopg2://u:p@db:5432/x"


def test_an_airflow_connection_in_uri_form(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SINK_DB", "postgresql://reader:pw@db.example:6432/wh")
    assert resolve("sink_db") == "postgresql+psycopg2://reader:pw@db.example:6432/wh"


def test_an_airflow_connection_in_json_form_with_characters_a_url_must_escape(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SINK_DB", json.dumps({
        "conn_type": "postgres", "host": "db.example", "port": 6432, "schema": "wh",
        "login": "reader", "password": "p@ss:w/rd"}))
    url = resolve("sink_db")
    from sqlalchemy.engine import make_url

    u = make_url(url)
    assert (u.drivername, u.host, u.port, u.database, u.username, u.password) == (
        "postgresql+psycopg2", "db.example", 6432, "wh", "reader", "p@ss:w/rd")


def test_a_sqlite_connection_in_json_form_names_its_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SINK_DB", '{"conn_type": "sqlite", "host": "/d/s.db"}')
    assert resolve("sink_db") == "sqlite:////d/s.db"


def test_what_a_task_hands_to_spark_wins_over_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SINK_DB", "sqlite:////old.db")
    monkeypatch.setenv("KAFKA_RECON_CONN_SINK_DB", "postgresql://r:pw@h/db")
    assert resolve("sink_db") == "postgresql+psycopg2://r:pw@h/db"
    # and only ids are handed over: a URL in the flow config needs nothing
    assert resolved_for_spark(["sink_db", "sqlite:////x.db", "sink_db"]) == {
        "KAFKA_RECON_CONN_SINK_DB": "postgresql+psycopg2://r:pw@h/db"}


@pytest.mark.parametrize(("value", "says"), [
    (None, "neither a URL, nor set as AIRFLOW_CONN_SINK_DB"),
    ('{"conn_type": "postgres",', "AIRFLOW_CONN_SINK_DB is not valid JSON"),
    ('["postgres"]', "must be a JSON object"),
    ('{"conn_type": "mssql", "host": "h"}', "type 'mssql' is not supported"),
    ('{"conn_type": "postgres", "port": "x"}', "port 'x' is not a number"),
    ("postgresql://u:secret@h:notaport/db", "port that is not a number"),
    ("postgresql+psycopg2://u:secret@h:notaport/db", "not a database URL"),
    ("oracle://u:secret@h/db", "no driver is bundled for 'oracle'"),
])
def test_a_connection_that_cannot_be_used_is_a_source_error_naming_it_never_its_password(
        monkeypatch: pytest.MonkeyPatch, value: str | None, says: str) -> None:
    if value is not None:
        monkeypatch.setenv("AIRFLOW_CONN_SINK_DB", value)
    with pytest.raises(ConnectionUnusable) as err:
        resolve("sink_db")
    assert "connection 'sink_db'" in str(err.value) and says in str(err.value)
    assert "secret" not in str(err.value)


def test_secrets_of_a_url_are_what_logs_must_mask() -> None:
    url = "postgresql+psycopg2://r:pw9@h/db"
    assert secrets_of(url) == [url, "pw9"] and secrets_of("sqlite:////x.db") == []
    assert redact(url) == "postgresql+psycopg2://r:***@h/db"
