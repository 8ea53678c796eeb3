"""Each SQL dialect's row: an Airflow connection's fields and extras become the URL its bundled
driver reads, the UTC session, and the JDBC source Spark reads with the same TLS settings."""

from __future__ import annotations

import json

import pytest
from sqlalchemy.engine import make_url

from kafka_recon.errors import JdbcError
from kafka_recon.sources.connections import resolve
from kafka_recon.sources.dialects import (
    MYSQL_UTC,
    PG_UTC,
    id_as_text,
    jdbc_source,
    lineage_namespace,
    session_args,
)

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_RECON_CONN_DB", raising=False)


def _conn(monkeypatch: pytest.MonkeyPatch, **fields: object) -> str:
    monkeypatch.setenv("AIRFLOW_CONN_DB", json.dumps(fields))
    return resolve("db")


def test_a_postgres_connections_tls_extras_reach_both_drivers_and_hook_only_extras_do_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    url = _conn(monkeypatch, conn_type="postgres", host="db", port=5433, schema="wh",
                login="r", password="pw", extra={
                    "sslmode": "verify-full", "sslrootcert": "/etc/ca.pem",
                    "options": "-c search_path=sales", "cursor": "dictcursor"})
    u = make_url(url)
    assert u.drivername == "postgresql+psycopg2"
    assert dict(u.query) == {"sslmode": "verify-full", "sslrootcert": "/etc/ca.pem",
                             "options": "-c search_path=sales"}
    # the connection's own options first, UTC last (the last setting wins)
    assert session_args(url) == {"options": f"-c search_path=sales {PG_UTC}",
                                 "connect_timeout": 10}
    src = jdbc_source(url)
    assert src.url == "jdbc:postgresql://db:5433/wh"
    assert {k: src.properties[k] for k in ("ssl", "sslmode", "sslrootcert", "options",
                                          "user", "password")} == {
        "ssl": "true", "sslmode": "verify-full", "sslrootcert": "/etc/ca.pem",
        "options": f"-c search_path=sales {PG_UTC}", "user": "r", "password": "pw"}
    assert lineage_namespace(url) == "postgres://db:5433" and id_as_text(url) == "TEXT"


def test_an_airflow_uri_keeps_its_query_as_the_connections_extra(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_DB",
                       "postgres://r:p%40w@db:5432/wh?sslmode=require&cursor=realdictcursor")
    u = make_url(resolve("db"))
    assert (u.password, dict(u.query)) == ("p@w", {"sslmode": "require"})
    assert "ssl" not in jdbc_source(
        "postgresql+psycopg2://r@db/wh?sslmode=disable").properties


def test_a_mysql_connection_is_read_by_pymysql_and_by_mariadbs_driver_in_utc(
        monkeypatch: pytest.MonkeyPatch) -> None:
    url = _conn(monkeypatch, conn_type="mysql", host="my", schema="shop", login="r",
                password="pw", extra={"ssl": {"ca": "/ca.pem"}, "charset": "utf8mb4",
                                      "client": "mysqlclient"})
    u = make_url(url)
    assert (u.drivername, u.port, dict(u.query)) == (
        "mysql+pymysql", None, {"ssl_ca": "/ca.pem", "charset": "utf8mb4"})
    assert session_args(url) == {"init_command": MYSQL_UTC, "connect_timeout": 10}
    src = jdbc_source(url)
    # jdbc:mysql (permitted by MariaDB's driver) makes Spark quote names with backticks
    assert src.url == "jdbc:mysql://my:3306/shop?permitMysqlScheme"
    assert {k: src.properties[k] for k in ("driver", "sessionInitStatement", "sslMode",
                                          "serverSslCert")} == {
        "driver": "org.mariadb.jdbc.Driver", "sessionInitStatement": MYSQL_UTC,
        "sslMode": "verify-ca", "serverSslCert": "/ca.pem"}
    assert id_as_text(url) == "CHAR" and lineage_namespace(url) == "mysql://my:3306"


def test_mariadb_and_airflows_mysql_uri_get_the_bundled_driver(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve("mysql://r:pw@my:3307/shop") == "mysql+pymysql://r:pw@my:3307/shop"
    assert resolve("mariadb+mysqldb://r@my/shop") == "mariadb+pymysql://r@my/shop"
    url = _conn(monkeypatch, conn_type="mariadb", host="m", schema="s")
    assert make_url(url).drivername == "mariadb+pymysql"


def test_a_client_certificate_spark_cannot_be_handed_is_refused_naming_it() -> None:
    with pytest.raises(JdbcError, match="client certificate .*ssl_cert"):
        jdbc_source("mysql+pymysql://r:secret@my/shop?ssl_ca=/ca&ssl_cert=/c&ssl_key=/k")
