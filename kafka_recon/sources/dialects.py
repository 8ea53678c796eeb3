"""What kafka-recon knows of each SQL database it reads, one row per dialect.

A row says how an Airflow connection of its types becomes an SQLAlchemy URL (with the extras
that matter to its driver kept: TLS modes, certificates, options), which bundled driver stages
it, how a session is put in UTC, how Spark reads it over JDBC (URL form, driver class,
properties), what type an id is cast to so it arrives as exact text, and how OpenLineage names
it. A database without a row is refused by name; docs/flows.md lists what another would need.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_recon.errors import ConnectionUnusable, JdbcError

# rows per round trip when a driver would otherwise fetch a whole result at once
FETCH_ROWS = 10_000
# every session kafka-recon opens reads and writes times in UTC, whatever the server's,
# database's or user's default zone: the window is bound as naive UTC times
PG_UTC = "-c TimeZone=UTC"
MYSQL_UTC = "SET time_zone = '+00:00'"


@dataclass(frozen=True)
class Dialect:
    name: str
    backends: tuple[str, ...]  # SQLAlchemy backend names
    conn_types: tuple[str, ...]  # Airflow connection types
    driver: str  # the DBAPI driver kafka-recon bundles, as SQLAlchemy names it
    text_type: str  # CAST(id AS <text_type>): ids arrive as exact text
    extras: tuple[str, ...]  # connection extras kept, as driver arguments in the URL's query
    jdbc: Callable[[Any], JdbcSource] | None = None
    session: Callable[[Mapping[str, Any]], dict[str, Any]] = lambda _q: {}
    lineage: Callable[[Any], str] | None = None
    # the statement that puts an open session in UTC (a provider hook's connection, which
    # kafka-recon does not open itself)
    utc: str | None = None


@dataclass(frozen=True)
class JdbcSource:
    url: str
    properties: dict[str, str]


def _credentials(u: Any) -> dict[str, str]:
    props = {}
    if u.username:
        props["user"] = u.username
    if u.password:
        props["password"] = str(u.password)
    return props


def _query(u: Any) -> dict[str, str]:
    """The URL's query as single strings (a key given twice keeps its last value)."""
    return {k: (v[-1] if isinstance(v, tuple) else v) for k, v in u.query.items()}


# ------------------------------------------------------------------ PostgreSQL
# libpq's connection parameters an Airflow postgres connection's extra may carry
_PG_EXTRAS = ("sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword", "sslcrl",
              "application_name", "connect_timeout", "target_session_attrs", "options",
              "keepalives", "keepalives_idle")
# libpq's name -> PostgreSQL JDBC's, for what both drivers know
_PG_JDBC = {"sslmode": "sslmode", "sslrootcert": "sslrootcert", "sslcert": "sslcert",
            "sslkey": "sslkey", "sslpassword": "sslpassword", "application_name":
            "ApplicationName", "connect_timeout": "connectTimeout",
            "target_session_attrs": "targetServerType"}


def _pg_options(query: Mapping[str, Any]) -> str:
    """The connection's own `options` (a search_path, ...), then UTC: the last one wins."""
    own = str(query.get("options") or "").strip()
    return f"{own} {PG_UTC}".strip()


def _pg_session(query: Mapping[str, Any]) -> dict[str, Any]:
    args: dict[str, Any] = {"options": _pg_options(query)}
    if "connect_timeout" not in query:
        args["connect_timeout"] = 10
    return args


def _pg_jdbc(u: Any) -> JdbcSource:
    query = _query(u)
    # PostgreSQL's driver holds a query's whole result in memory unless it fetches through a
    # cursor: with a fetch size Spark reads each slice in batches (its dialect turns autocommit
    # off for that), so a slice of millions of ids does not have to fit in a task's heap
    props = {"driver": "org.postgresql.Driver", "options": _pg_options(query),
             "fetchsize": str(FETCH_ROWS), **_credentials(u)}
    for key, value in query.items():
        if key in _PG_JDBC:
            props[_PG_JDBC[key]] = value
    if query.get("sslmode", "disable") != "disable":
        props["ssl"] = "true"
    return JdbcSource(f"jdbc:postgresql://{u.host or 'localhost'}:{u.port or 5432}/"
                      f"{u.database or ''}", props)


def _pg_lineage(u: Any) -> str:
    return f"postgres://{u.host}:{u.port or 5432}"


# ------------------------------------------------------------------ MySQL, MariaDB
# PyMySQL's arguments (SQLAlchemy turns ssl_* into its `ssl` dict) an extra may carry
_MYSQL_EXTRAS = ("charset", "ssl_ca", "ssl_cert", "ssl_key", "ssl_check_hostname",
                 "connect_timeout")


def _mysql_session(query: Mapping[str, Any]) -> dict[str, Any]:
    args: dict[str, Any] = {"init_command": MYSQL_UTC}
    if "connect_timeout" not in query:
        args["connect_timeout"] = 10
    return args


def _mysql_jdbc(u: Any) -> JdbcSource:
    query = _query(u)
    # MariaDB's driver reads MySQL too; the jdbc:mysql: form (permitMysqlScheme) makes Spark
    # pick its MySQL dialect, which quotes names with backticks (a double-quoted name is a
    # string to MySQL). A fetch size makes it stream a slice instead of holding it whole.
    props = {"driver": "org.mariadb.jdbc.Driver", "sessionInitStatement": MYSQL_UTC,
             "fetchsize": str(FETCH_ROWS), **_credentials(u)}
    if "ssl_cert" in query or "ssl_key" in query:
        raise JdbcError(f"{u.render_as_string(hide_password=True)}: a client certificate "
                        "(ssl_cert, ssl_key) is not handed to Spark's MariaDB driver yet; "
                        "give the server's CA (ssl_ca) and a password")
    if "ssl_ca" in query:
        props.update({"sslMode": "verify-ca", "serverSslCert": query["ssl_ca"]})
        if query.get("ssl_check_hostname", "").lower() == "true":
            props["sslMode"] = "verify-full"
    if "connect_timeout" in query:
        props["connectTimeout"] = str(int(float(query["connect_timeout"]) * 1000))
    return JdbcSource(f"jdbc:mysql://{u.host or 'localhost'}:{u.port or 3306}/"
                      f"{u.database or ''}?permitMysqlScheme", props)


def _mysql_lineage(u: Any) -> str:
    return f"mysql://{u.host}:{u.port or 3306}"


def _sqlite_jdbc(u: Any) -> JdbcSource:
    if not u.database or u.database == ":memory:":
        raise JdbcError(f"{u.render_as_string(hide_password=True)}: an in-memory SQLite "
                        "database cannot be shared with Spark; give a file")
    return JdbcSource(f"jdbc:sqlite:{u.database}", {"driver": "org.sqlite.JDBC"})


DIALECTS = (
    Dialect("postgresql", ("postgresql",), ("postgres", "postgresql"), "psycopg2",
            "TEXT", _PG_EXTRAS, _pg_jdbc, _pg_session, _pg_lineage, "SET TIME ZONE 'UTC'"),
    Dialect("mysql", ("mysql", "mariadb"), ("mysql", "mariadb"), "pymysql", "CHAR",
            _MYSQL_EXTRAS, _mysql_jdbc, _mysql_session, _mysql_lineage, MYSQL_UTC),
    Dialect("sqlite", ("sqlite",), ("sqlite",), "sqlite", "TEXT", (), _sqlite_jdbc),
)
SUPPORTED = tuple(d.name for d in DIALECTS)
NAMES = ", ".join(SUPPORTED) + " (MariaDB as mysql)"


def of_backend(backend: str, name: str = "connection") -> Dialect:
    d = known(backend)
    if d is not None:
        return d
    raise ConnectionUnusable(f"{name}: no driver is bundled for '{backend}' "
                             f"(supported: {NAMES})")


def known(backend: str) -> Dialect | None:
    """The row of an SQLAlchemy backend, if kafka-recon has one."""
    return next((d for d in DIALECTS if backend in d.backends), None)


def of_url(url: str, name: str = "connection") -> tuple[Dialect, Any]:
    from sqlalchemy.engine import make_url

    u = make_url(url)
    return of_backend(u.get_backend_name(), name), u


def of_conn_type(conn_id: str, conn_type: str | None) -> Dialect:
    kind = (conn_type or "").lower()
    for d in DIALECTS:
        if kind in d.conn_types:
            return d
    types = ", ".join(t for d in DIALECTS for t in d.conn_types)
    raise ConnectionUnusable(f"connection '{conn_id}': type {conn_type!r} is not supported "
                             f"(supported: {types})")


def _extras_of(conn_id: str, d: Dialect, extra: Mapping[str, Any]) -> dict[str, str]:
    """The extras the dialect's driver takes, as URL query text. A MySQL connection's `ssl`
    (Airflow's MySQL hook form: a dict or JSON text with ca, cert, key) becomes ssl_*."""
    extra = dict(extra)
    if d.name == "mysql" and "ssl" in extra:
        ssl = extra.pop("ssl")
        if isinstance(ssl, str):
            try:
                ssl = json.loads(ssl)
            except ValueError:
                raise ConnectionUnusable(f"connection '{conn_id}': its extra's 'ssl' is not a "
                                         "JSON object of ca, cert, key") from None
        if not isinstance(ssl, dict):
            raise ConnectionUnusable(f"connection '{conn_id}': its extra's 'ssl' must be an "
                                     "object of ca, cert, key")
        extra.update({f"ssl_{k}": v for k, v in ssl.items() if k in ("ca", "cert", "key")})
    return {k: str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in extra.items() if k in d.extras and v not in (None, "")}


def url_from_fields(conn_id: str, conn_type: str | None, host: str | None = None,
                    schema: str | None = None, login: str | None = None,
                    password: str | None = None, port: int | str | None = None,
                    extra: Mapping[str, Any] | None = None) -> str:
    """An SQLAlchemy URL from the fields of an Airflow connection, its driver's extras kept."""
    from sqlalchemy.engine import URL

    d = of_conn_type(conn_id, conn_type)
    if d.name == "sqlite":
        path = host or schema
        if not path:
            raise ConnectionUnusable(f"connection '{conn_id}': a sqlite connection needs the "
                                     "file in 'host'")
        return f"sqlite:///{path}"
    try:
        port_n = int(port) if port not in (None, "") else None
    except (TypeError, ValueError):
        raise ConnectionUnusable(
            f"connection '{conn_id}': port {port!r} is not a number") from None
    backend = "mariadb" if (conn_type or "").lower() == "mariadb" else d.backends[0]
    return URL.create(f"{backend}+{d.driver}", username=login or None, password=password or None,
                      host=host or None, port=port_n, database=schema or None,
                      query=_extras_of(conn_id, d, extra or {})
                      ).render_as_string(hide_password=False)


def with_bundled_driver(url: str) -> str:
    """The URL with the driver kafka-recon bundles: Airflow spells PostgreSQL `postgres://`;
    SQLAlchemy 2 reads a bare `postgresql://` as psycopg 3 and `mysql://` as mysqlclient, while
    the drivers shipped are psycopg2 and PyMySQL."""
    import re

    url = re.sub(r"^postgres(ql)?(\+[a-z0-9_]+)?://", "postgresql+psycopg2://", url)
    return re.sub(r"^(mysql|mariadb)(\+[a-z0-9_]+)?://", r"\1+pymysql://", url)


def session_args(url: str) -> dict[str, Any]:
    """SQLAlchemy connect arguments putting a session in UTC (and a connect timeout)."""
    d, u = of_url(url)
    return d.session(_query(u))


def jdbc_source(url: str) -> JdbcSource:
    """How Spark reads the database of an SQLAlchemy URL over JDBC."""
    d, u = of_url(url)
    assert d.jdbc is not None
    return d.jdbc(u)


def id_as_text(url: str) -> str:
    d, _ = of_url(url)
    return d.text_type


def lineage_namespace(url: str) -> str | None:
    """OpenLineage's namespace of the database (None for SQLite: it names a file)."""
    d, u = of_url(url)
    return d.lineage(u) if d.lineage else None
