"""A run's lineage: the flow's tiers as the datasets the reconciliation read, its result as the
dataset it wrote, named the way OpenLineage names them.

Names follow OpenLineage's dataset naming (https://openlineage.io/docs/spec/naming):

- a Kafka tier: namespace `kafka://<first bootstrap server>`, name the topic;
- a PostgreSQL tier: namespace `postgres://<host>:<port>`, name `<database>.<schema>.<table>`
  for every table the tier's query reads (found by OpenLineage's own SQL parser; an unqualified
  table is in `public`);
- a SQLite tier (no convention in the spec): namespace `sqlite:<absolute file path>` (as the
  OpenLineage Spark listener names a JDBC read of it), name the table;
- a Flume tier (none either): namespace `flume://<host>:<port>` of its metrics address, name
  `<source>/<sink>` (the two counters it compares);
- the run's result: namespace `file`, name the absolute path of `result.json`.

Plain values only: the Airflow face turns them into OpenLineage objects, so nothing here needs
the OpenLineage client. A tier whose connection cannot be resolved, or whose query the parser
cannot read, is left out and named in `skipped`: lineage never fails a run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from kafka_recon.config import Flow, FlumeTier, KafkaTier, SqlTier, TableTier
from kafka_recon.errors import ReconError


@dataclass(frozen=True)
class LineageDataset:
    """One dataset as OpenLineage names it, and the tier it stands for."""
    namespace: str
    name: str
    tier: str


@dataclass(frozen=True)
class Lineage:
    inputs: tuple[LineageDataset, ...]
    outputs: tuple[LineageDataset, ...]
    skipped: tuple[str, ...] = ()  # one line per tier left out, and why


def _kafka(tier: KafkaTier) -> list[LineageDataset]:
    from kafka_recon.sources.kafka_client import endpoint

    first = endpoint(tier).bootstrap.split(",")[0]
    return [LineageDataset(f"kafka://{first}", tier.topic, tier.name)]


def _tables(sql: str, dialect: str) -> list[tuple[str | None, str | None, str]]:
    """Every table the query reads, sorted (database, schema, name)."""
    import openlineage_sql

    parsed = openlineage_sql.parse([sql], dialect=dialect)
    if parsed.errors and not parsed.in_tables:
        raise ValueError(parsed.errors[0].message)
    tables = [(t.database, t.schema, t.name) for t in parsed.in_tables]
    return sorted(tables, key=lambda t: tuple(p or "" for p in t))


def _sql(tier: SqlTier) -> list[LineageDataset]:
    from sqlalchemy.engine import make_url

    from kafka_recon.sources.connections import resolve
    from kafka_recon.sources.dialects import lineage_namespace

    resolved = resolve(tier.conn)
    url = make_url(resolved)
    sql = tier.ids or tier.counts or ""
    namespace = lineage_namespace(resolved)
    if namespace is None:  # SQLite: a file
        where = f"sqlite:{Path(url.database or '').resolve()}"
        return [LineageDataset(where, name, tier.name)
                for _db, _schema, name in _tables(sql, "sqlite")]
    if namespace.startswith("mysql:"):  # OpenLineage names a MySQL table database.table
        return [LineageDataset(namespace, f"{db or schema or url.database}.{name}", tier.name)
                for db, schema, name in _tables(sql, "mysql")]
    return [LineageDataset(namespace, f"{db or url.database}.{schema or 'public'}.{name}",
                           tier.name)
            for db, schema, name in _tables(sql, "postgres")]


def _table(tier: TableTier) -> LineageDataset:
    """An Iceberg table by its warehouse (or catalog) and name; files by where they are, as
    OpenLineage names a path: `file` or `s3://<bucket>`."""
    if tier.format == "iceberg":
        catalog, name = tier.table.split(".", 1)
        where = tier.catalog.get("warehouse") or f"iceberg://{catalog}"
        return LineageDataset(where.rstrip("/"), name, tier.name)
    place = _result(tier.table)
    return LineageDataset(place.namespace, place.name, tier.name)


def _flume(tier: FlumeTier) -> list[LineageDataset]:
    u = urlsplit(tier.metrics_url)
    return [LineageDataset(f"flume://{u.hostname}:{u.port or 80}", f"{tier.source}/{tier.sink}",
                           tier.name)]


def _result(result: Path | str) -> LineageDataset:
    """The result file as OpenLineage names a file: `file` and its path, or, in an object
    store, `s3://<bucket>` and its key (made from the text alone: no store is reached)."""
    text = str(result)
    if "://" in text and not text.startswith("file://"):
        u = urlsplit(text)
        return LineageDataset(f"{u.scheme}://{u.hostname}", u.path.lstrip("/"), "result")
    return LineageDataset("file", str(Path(text.removeprefix("file://")).resolve()), "result")


def of_run(flow: Flow, result: Path | str | None) -> Lineage:
    """What one run of the flow read (every tier) and wrote (its result: a local path, or an
    object store's URL)."""
    inputs: list[LineageDataset] = []
    skipped: list[str] = []
    for tier in flow.tiers:
        try:
            if isinstance(tier, KafkaTier):
                inputs += _kafka(tier)
            elif isinstance(tier, SqlTier):
                inputs += _sql(tier)
            elif isinstance(tier, TableTier):
                inputs.append(_table(tier))
            else:
                inputs += _flume(tier)
        except (ReconError, ValueError) as e:
            skipped.append(f"tier '{tier.name}': {str(e).splitlines()[0]}")
    outputs = [_result(result)] if result else []
    return Lineage(tuple(inputs), tuple(outputs), tuple(skipped))


# The Spark jobs' own lineage: the OpenLineage Spark listener (jar in .jars/lineage), reporting
# the plan's view (the Kafka source, the JDBC reads) as children of the Airflow task's run.
LISTENER = "io.openlineage.spark.agent.OpenLineageSparkListener"
# the listener looks for extension providers in every class loader, which Java 17 only allows
# with java.security opened (else a warning and a stack trace in every driver log)
LISTENER_JAVA_OPTIONS = "--add-opens=java.base/java.security=ALL-UNNAMED"


def listener_conf(transport: dict[str, object], namespace: str, driver_java_options: str
               ) -> tuple[dict[str, str], str | None]:
    """The Spark settings that turn the listener on and send its events where Airflow's go.

    `transport` is Airflow's `[openlineage] transport`. An `http` one (alone or in a
    `composite`) is handed by the Spark provider's own injection (URL, endpoint, API key);
    `file` and `console` are handed here (a file is appended to, as Airflow's is with
    `append: true`; without it the Spark job writes beside it, `<path>.spark.jsonl`). Anything
    else is not handed: the second value says so, and the jobs emit nothing unless
    spark-defaults sets `spark.openlineage.transport.*`.
    """
    conf = {"spark.extraListeners": LISTENER, "spark.openlineage.namespace": namespace,
            "spark.redaction.regex": REDACTION_REGEX,
            "spark.driver.extraJavaOptions": f"{driver_java_options} {LISTENER_JAVA_OPTIONS}"
            .strip()}
    kind = str(transport.get("type", ""))
    if kind == "file":
        path = str(transport.get("log_file_path", ""))
        conf["spark.openlineage.transport.type"] = "file"
        conf["spark.openlineage.transport.location"] = (
            path if transport.get("append") else f"{path}.spark.jsonl")
    elif kind == "console":
        conf["spark.openlineage.transport.type"] = "console"
    elif kind not in ("http", "composite"):  # the provider hands http (in a composite too)
        return conf, (f"the Spark jobs' lineage is not sent: Airflow's OpenLineage transport "
                      f"'{kind}' cannot be handed to Spark (http, file and console can); set "
                      f"spark.openlineage.transport.* in Spark's defaults")
    return conf, None


# Spark's default redaction, plus an API key's names (`spark.openlineage.transport.auth.apiKey`
# is none of secret, password, token): the Spark UI and event log show the conf redacted
REDACTION_REGEX = r"(?i)secret|password|token|access[.]key|api[._-]?key"
_SECRET_NAME = re.compile(r"(?i)api[._-]?key|token|secret|password")


def transport_secrets(transport: object) -> list[str]:
    """Every value of Airflow's OpenLineage transport kept under a secret's name (an http
    transport's `auth.apiKey`, a token, ...): masked in the task's logs before Spark is handed
    them on its command line."""
    found: list[str] = []
    if isinstance(transport, dict):
        for key, value in transport.items():
            if isinstance(value, (dict, list)):
                found += transport_secrets(value)
            elif value and _SECRET_NAME.search(str(key)):
                found.append(str(value))
    elif isinstance(transport, list):
        for item in transport:
            found += transport_secrets(item)
    return found
