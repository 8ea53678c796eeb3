"""A SQL tier's `conn:`, resolved to an SQLAlchemy URL the way a user of Airflow expects.

- a URL (`postgresql://...`, `mysql://...`, `sqlite:///...`) is used as it is, with the driver
  kafka-recon bundles (psycopg2, PyMySQL);
- inside an Airflow task, a connection id is resolved through Airflow itself: its metadata
  database, `AIRFLOW_CONN_*` variables and any secrets backend, in Airflow's order;
- a Spark job started by such a task finds the connection its task resolved in
  `KAFKA_RECON_CONN_<ID>` (never on the spark-submit command line);
- anywhere else (the command line, tests), `AIRFLOW_CONN_<ID>` in either of Airflow's forms:
  a URI or JSON (`{"conn_type": "postgres", "host": ..., "login": ..., "password": ...}`).

A connection's fields become a URL by its type's row in `kafka_recon.sources.dialects`, which
keeps the extras its driver takes (TLS modes and certificates, options).

Whatever cannot be resolved, parsed or driven is a `ConnectionUnusable` naming the connection: the
run is inconclusive, never a traceback.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

from kafka_recon.errors import ConnectionNotFound, ConnectionUnusable
from kafka_recon.settings import conn_env_var
from kafka_recon.sources.dialects import of_url, url_from_fields, with_bundled_driver


def airflow_env_var(conn_id: str) -> str:
    return conn_env_var(conn_id, "AIRFLOW_CONN_")


def in_airflow_task() -> bool:
    """True inside a task run by Airflow's task runner (it talks to its supervisor)."""
    runner = sys.modules.get("airflow.sdk.execution_time.task_runner")
    return getattr(runner, "SUPERVISOR_COMMS", None) is not None


def _json_form(conn_id: str, text: str, var: str) -> dict[str, Any] | None:
    """The fields of AIRFLOW_CONN_* in Airflow's JSON form; None for the URI form."""
    if not text.startswith(("{", "[")):  # an array is a malformed JSON form
        return None
    try:
        fields = json.loads(text)
    except ValueError as exc:
        raise ConnectionUnusable(
            f"connection '{conn_id}': {var} is not valid JSON: {exc}") from None
    if not isinstance(fields, dict):
        raise ConnectionUnusable(f"connection '{conn_id}': {var} must be a JSON object")
    return fields


def _from_airflow_value(conn_id: str, value: str, var: str) -> str:
    """AIRFLOW_CONN_* in URI or JSON form."""
    text = value.strip()
    # the JSON form, and Airflow's URI form of a server database (its query is the connection's
    # extra, or `__extra__` as JSON): the fields, of whose extra the driver gets what it takes
    if text.startswith(("{", "[")) or re.match(r"^(postgres(ql)?|mysql|mariadb)://", text):
        return url_from_fields(conn_id, **_fields_from_value(conn_id, text, var))
    return text


def _through_airflow(conn_id: str) -> str:
    from airflow.sdk import BaseHook

    try:
        c = BaseHook.get_connection(conn_id)
    except Exception as exc:  # AirflowNotFoundException, a backend's own errors
        raise ConnectionNotFound(f"connection '{conn_id}': Airflow does not know it "
                                 f"({type(exc).__name__}: {exc})") from None
    return url_from_fields(conn_id, c.conn_type, c.host, c.schema, c.login, c.password, c.port,
                           _extra_dict(conn_id, c.extra_dejson))


def normalise(url: str, conn_id: str | None = None) -> str:
    """The URL with kafka-recon's bundled driver, checked to name a database it reads."""
    from sqlalchemy.exc import ArgumentError

    url = with_bundled_driver(url)
    name = f"connection '{conn_id}'" if conn_id else "connection"
    try:
        of_url(url, name)
    except (ArgumentError, ValueError):  # a malformed URL, a port that is not a number
        raise ConnectionUnusable(f"{name}: not a database URL: {redact(url)}") from None
    return url


def _from_airflow_store(conn_id: str) -> Any | None:
    """Outside a task, on a host where Airflow is deployed (`kafka-recon check` beside the
    scheduler): the connection as Airflow's secrets backends and metadata database hold it."""
    from kafka_recon.settings import airflow_deployed

    if not airflow_deployed():
        return None
    try:
        from airflow.models.connection import Connection

        return Connection.get_connection_from_secrets(conn_id)
    except Exception:  # not found, no metadata database here: the caller names the variable
        return None


def resolve(conn: str) -> str:
    """The SQLAlchemy URL a tier's `conn:` stands for (see the module's docstring)."""
    if "://" in conn:
        return normalise(conn)
    handed = os.environ.get(conn_env_var(conn))
    if handed:
        return normalise(handed, conn)
    if in_airflow_task():
        return normalise(_through_airflow(conn), conn)
    var = airflow_env_var(conn)
    value = os.environ.get(var)
    if not value:
        c = _from_airflow_store(conn)
        if c is None:
            raise ConnectionNotFound(f"connection '{conn}': neither a URL, nor set as {var}, "
                                     "nor known to Airflow here")
        return normalise(url_from_fields(conn, c.conn_type, c.host, c.schema, c.login,
                                         c.password, c.port, _extra_dict(conn, c.extra_dejson)),
                         conn)
    return normalise(_from_airflow_value(conn, value, var), conn)


def redact(url: str) -> str:
    """A URL fit for a message or a log: the password replaced."""
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)


def where(url: str) -> str:
    """Where a URL points, without credentials: for messages."""
    from sqlalchemy.engine import make_url

    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        return f"sqlite file {u.database}"
    return f"{u.get_backend_name()} at {u.host}:{u.port or 'default port'}/{u.database}"


def secrets_of(url: str) -> list[str]:
    """What a log must never show of this URL: its password, and the URL itself."""
    from sqlalchemy.engine import make_url

    password = make_url(url).password
    return [url, str(password)] if password else []


def resolved_for_spark(conns: list[str], kafka_conns: list[str] | None = None) -> dict[str, Any]:
    """`KAFKA_RECON_CONN_<ID>` for each connection id, resolved here (in the Airflow task), for
    the Spark job it starts: an SQL tier's URL, a kafka tier's settings as a JSON object. URLs
    in the flow config need no handing over."""
    out = {conn_env_var(c): resolve(c) for c in dict.fromkeys(conns) if "://" not in c}
    out.update({conn_env_var(c): json.dumps(resolve_kafka(c), sort_keys=True)
                for c in dict.fromkeys(kafka_conns or [])})
    return out


# ------------------------------------------------------------------ kafka connections
def _kafka_extra(conn_id: str, conn_type: str | None, extra: Any, host: str | None = None,
                 port: Any = None) -> dict[str, Any]:
    """The librdkafka dict of a connection of the Kafka provider's type (its extra)."""
    if conn_type and conn_type.lower() != "kafka":
        raise ConnectionUnusable(f"connection '{conn_id}': type {conn_type!r} is not a Kafka "
                          "connection (type 'kafka', its extra a librdkafka config dict)")
    extra = _extra_dict(conn_id, extra, " of librdkafka settings")
    if "bootstrap.servers" not in extra and host:
        extra["bootstrap.servers"] = f"{host}:{port}" if port else host
    return extra


def resolve_kafka(conn: str) -> dict[str, Any]:
    """A kafka tier's connection: its librdkafka settings (and registry settings), found as
    `resolve` finds an SQL tier's. Inside an Airflow task every secret is masked in its log."""
    handed = os.environ.get(conn_env_var(conn))
    if handed:  # the settings themselves, as the task resolved them
        return _kafka_extra(conn, "kafka", handed)
    f = resolve_fields(conn, "a Kafka connection: JSON with conn_type 'kafka' and a librdkafka "
                             "dict as extra")
    return _kafka_extra(conn, f["conn_type"], f["extra"], f["host"], f["port"])


# ------------------------------------------------------------------ other connections
FIELDS = ("conn_type", "host", "schema", "login", "password", "port", "extra")


def _extra_dict(conn_id: str, extra: Any, of: str = "") -> dict[str, Any]:
    """A connection's extra as a dict (Airflow gives it as JSON text or already parsed); `of`
    says what the object should hold, for the message."""
    if isinstance(extra, str):
        try:
            extra = json.loads(extra) if extra.strip() else {}
        except ValueError as exc:
            raise ConnectionUnusable(f"connection '{conn_id}': its extra is not valid JSON: "
                                     f"{exc}") from None
    if not isinstance(extra, dict):
        raise ConnectionUnusable(f"connection '{conn_id}': its extra must be a JSON object{of}")
    return dict(extra)


def _fields_from_value(conn_id: str, value: str, var: str) -> dict[str, Any]:
    """AIRFLOW_CONN_* (or a handed KAFKA_RECON_CONN_*) in JSON or URI form, as fields."""
    from urllib.parse import parse_qsl, unquote, urlsplit

    text = value.strip()
    fields = _json_form(conn_id, text, var)
    if fields is None:
        parts = urlsplit(text)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        fields = {"conn_type": parts.scheme.replace("-", "_"), "host": parts.hostname,
                  "login": unquote(parts.username) if parts.username else None,
                  "password": unquote(parts.password) if parts.password else None,
                  "schema": parts.path.lstrip("/") or None,
                  "extra": query.pop("__extra__", None) or query}
        try:
            fields["port"] = parts.port
        except ValueError:
            raise ConnectionUnusable(f"connection '{conn_id}': {var} has a port that is not a "
                                     "number") from None
    out = {k: fields.get(k) for k in FIELDS}
    out["extra"] = _extra_dict(conn_id, out["extra"] or {})
    return out


def resolve_fields(conn: str, kind: str = "") -> dict[str, Any]:
    """Any connection's fields (`FIELDS`, extra as a dict), found as `resolve` finds an SQL
    tier's: handed to a Spark job, through Airflow in a task, else `AIRFLOW_CONN_<ID>`.
    `kind` says what the connection should be, for the message when none is found."""
    handed = os.environ.get(conn_env_var(conn))
    if handed:
        return _fields_from_value(conn, handed, conn_env_var(conn))
    if in_airflow_task():
        from airflow.sdk import BaseHook

        try:
            c = BaseHook.get_connection(conn)
        except Exception as exc:  # AirflowNotFoundException, a backend's own errors
            raise ConnectionNotFound(f"connection '{conn}': Airflow does not know it "
                                     f"({type(exc).__name__}: {exc})") from None
    else:
        var = airflow_env_var(conn)
        value = os.environ.get(var)
        if value:
            return _fields_from_value(conn, value, var)
        stored = _from_airflow_store(conn)
        if stored is None:
            raise ConnectionNotFound(f"connection '{conn}': neither set as {var} nor known to "
                                     "Airflow here" + (f" ({kind})" if kind else ""))
        c = stored
    return {"conn_type": c.conn_type, "host": c.host, "schema": c.schema, "login": c.login,
            "password": c.password, "port": c.port,
            "extra": _extra_dict(conn, c.extra_dejson)}


def handed_fields(conns: list[str]) -> dict[str, str]:
    """`KAFKA_RECON_CONN_<ID>` of other connections (an object store's), as JSON fields."""
    return {conn_env_var(c): json.dumps(resolve_fields(c), sort_keys=True)
            for c in dict.fromkeys(conns)}
