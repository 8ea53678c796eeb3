"""The flow config (docs/design.md, "Flow config"): loaded from YAML and validated strictly.

Every error names the file, the flow and the field and says what was expected; unknown keys and
repeated flow names are errors. Strings may use `${VAR}` or `${VAR:-default}` so one file serves
the demo, CI and production (ports and database paths differ, the flow does not).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from kafka_recon.errors import ConfigError, FlowInvalid

_DURATION = re.compile(r"^\s*(\d+)\s*(s|m|h|d)\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def parse_duration(text: str) -> timedelta:
    m = _DURATION.match(str(text))
    if not m:
        raise ValueError(f"expected a duration like 30s, 10m, 1h or 1d, got {text!r}")
    return timedelta(**{_UNITS[m.group(2)]: int(m.group(1))})


def _as_duration(v: Any) -> Any:
    return parse_duration(v) if isinstance(v, str) else v


# a duration field: "30s", "10m", "2h", "1d" in the YAML, a timedelta in the model
Duration = Annotated[timedelta, BeforeValidator(_as_duration)]


def _shown(d: timedelta) -> str:
    s = int(d.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s and s % size == 0:
            return f"{s // size}{unit}"
    return f"{s}s"


def schedule_of(window: timedelta) -> str | None:
    """The cron of a DAG whose data intervals are `window` long, aligned on midnight UTC
    (None: no such cron)."""
    s = int(window.total_seconds())
    if s == 86400:
        return "0 0 * * *"
    if s % 3600 == 0 and 0 < s < 86400 and 86400 % s == 0:
        return "0 * * * *" if s == 3600 else f"0 */{s // 3600} * * *"
    if s % 60 == 0 and 0 < s < 3600 and 3600 % s == 0:
        return f"*/{s // 60} * * * *"
    return None


class _Strict(BaseModel):
    # a field's docstring is its description: harness.docs makes
    # docs/reference/flow-config.md from them, read from the source (not at import)
    model_config = ConfigDict(extra="forbid", frozen=True)


EVENT_TIME_FORMATS = ("iso8601", "epoch_s", "epoch_ms", "epoch_us", "epoch_ns")
# json: the value is JSON text; avro / json_schema: the schema registry's wire format (magic
# byte 0, a 4-byte schema id, then Avro binary or JSON text); avro with `schema_file`: plain
# Avro binary written without a registry
RECORD_FORMATS = ("json", "avro", "json_schema")


class RecordSpec(_Strict):
    id: str = Field(description='JSONPath into the Kafka value (e.g. "$.order_id"), "key" or '
                                '"value" (the whole key or value as UTF-8 text)')
    event_time: str = Field(description='JSONPath into the value, "kafka_timestamp", or with '
                                        'a debezium envelope "source_ts"')
    envelope: Literal["none", "debezium"] = "none"
    """none, or debezium: the value is a change event (JsonConverter, with or without its schema
    part); paths are read in the row image, `after` (c, u, r) or `before` (d); tombstones are no
    records; several changes of one id are one id present."""
    format: str = "json"
    """How a value is decoded: json; avro or json_schema in the schema registry's wire format
    (magic byte 0, a 4-byte schema id); avro with `schema_file` for plain Avro binary written
    without a registry."""
    schema_file: str | None = Field(None, description="an Avro schema (.avsc) for topics "
                                                      "written without a registry")
    event_time_format: str = Field(
        "iso8601", description="iso8601, epoch_s, epoch_ms, epoch_us, epoch_ns, or a Spark "
                               "datetime pattern such as 'dd/MM/yyyy HH:mm:ss' (UTC)")

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if v in ("key", "value") or v.startswith("$."):
            return v
        raise ValueError(f'expected a JSONPath starting with "$.", "key" or "value", got {v!r}')

    @field_validator("event_time")
    @classmethod
    def _time(cls, v: str) -> str:
        if v in ("kafka_timestamp", "source_ts") or v.startswith("$."):
            return v
        raise ValueError(f'expected a JSONPath starting with "$.", "kafka_timestamp" or '
                         f'"source_ts", got {v!r}')

    def model_post_init(self, __context: Any) -> None:
        if self.event_time == "source_ts" and self.envelope != "debezium":
            raise ValueError('event_time "source_ts" is the change time of a debezium '
                             'envelope: set envelope: debezium')
        if self.schema_file and self.format != "avro":
            raise ValueError("schema_file is an Avro schema: set format: avro")
        if self.format != "json" and self.envelope == "debezium":
            raise ValueError("a debezium envelope is read from JSON values (format: json)")
        if self.format != "json" and self.id == "value":
            raise ValueError(f'id "value" is a whole text value; a {self.format} record names '
                             "its id by a path into the decoded record")
        if self.envelope == "debezium" and self.id == "value":
            raise ValueError('id "value" is a whole plain value; a debezium change event '
                             'names its id by a JSONPath into the row')

    @field_validator("format")
    @classmethod
    def _record_format(cls, v: str) -> str:
        if v == "protobuf":
            raise ValueError("protobuf records cannot be read: spark-protobuf is not on the "
                             "Maven Central kafka-recon installs from (docs/cluster.md, 'Record "
                             "formats')")
        if v not in RECORD_FORMATS:
            raise ValueError(f"expected one of {', '.join(RECORD_FORMATS)}, got {v!r}")
        return v

    @field_validator("event_time_format")
    @classmethod
    def _format(cls, v: str) -> str:
        if v in EVENT_TIME_FORMATS or "y" in v:  # a datetime pattern names the year
            return v
        raise ValueError(f"expected one of {', '.join(EVENT_TIME_FORMATS)} or a datetime "
                         f"pattern with a year (such as 'dd/MM/yyyy HH:mm:ss'), got {v!r}")


_FRACTION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
ToleranceKind = Literal["loss", "duplicate", "unexpected", "dead_lettered"]


def _allowance(v: Any) -> int | str:
    """A count of records (0, 25) or a percentage of the hop's expected records ("0.01%")."""
    if isinstance(v, bool):
        raise ValueError(f"expected a whole number of records or a percentage such as "
                         f"'0.01%', got {v!r}")
    if isinstance(v, int):
        if v < 0:
            raise ValueError(f"a count of records must not be negative, got {v}")
        return v
    if isinstance(v, str):
        m = _FRACTION.match(v)
        if m and float(m.group(1)) <= 100:
            return f"{m.group(1)}%"
        if v.strip().isdigit():
            return int(v)
    raise ValueError(f"expected a whole number of records or a percentage between 0% and "
                     f"100% such as '0.01%', got {v!r}")


Allowance = Annotated[int | str, BeforeValidator(_allowance)]


class Tolerance(_Strict):
    """How many records of each kind a hop may show before its window fails: a count, or a
    percentage of the records the hop expected (rounded down: 0.01% of 9,999 records is 0)."""
    loss: Allowance = 0
    """Records a hop may lose before its window fails: a count or a percentage."""
    duplicate: Allowance = 0
    """Duplicate records a hop may show before its window fails."""
    unexpected: Allowance = 0
    """Records downstream that no upstream tier had, allowed before the window fails."""
    dead_lettered: Allowance = 0
    """Records a sink connector routed to its dead-letter queue, allowed before the window
    fails: they are not lost (their ids, errors and offsets are reported), but nobody loaded
    them; "100%" reports them without ever failing the window."""

    def allowed(self, kind: ToleranceKind, expected: int | None) -> int:
        """The records of `kind` the hop may show, for a hop that expected `expected`."""
        value = getattr(self, kind)
        if isinstance(value, int):
            return value
        # exact decimal arithmetic: 0.01% of 10,000 is 1, never 0.9999...
        from decimal import Decimal

        return int(Decimal(value[:-1]) * (expected or 0) // 100)


# the columns a replay's Kafka rows already have (Spark's names ignore case): a drop field by
# one of these names would hide the record's own
_RESERVED_FIELDS = frozenset({"key", "value", "topic", "partition", "offset", "timestamp",
                              "timestamptype", "headers", "digest", "dropped", "id",
                              "event_time", "kafka_ts", "reason", "_id", "_ts", "_why"})
_FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Drops(_Strict):
    """The records a processor filters out on purpose, said over the records of the topic
    before it: they are `filtered` on the process hop, not lost."""
    where: str = Field(min_length=1)
    """A Spark SQL boolean expression over `fields`; a record for which it is true is dropped on
    purpose (null, a field absent, means kept)."""
    fields: dict[str, str] = Field(min_length=1)
    """Name -> where it is in the upstream topic's record: a JSONPath into the decoded value, or
    "key"; each is text (compare numbers with try_cast: a plain cast of bad text fails)."""

    @field_validator("fields")
    @classmethod
    def _fields(cls, v: dict[str, str]) -> dict[str, str]:
        for name, path in v.items():
            if not _FIELD_NAME.match(name):
                raise ValueError(f"field name {name!r}: expected letters, digits and _")
            if name.lower() in _RESERVED_FIELDS:
                raise ValueError(f"field name {name!r} is a column of the replay's records: "
                                 "pick another name")
            if not (path == "key" or path.startswith("$.")):
                raise ValueError(f'field {name!r}: expected a JSONPath starting with "$." or '
                                 f'"key", got {path!r}')
        return v


class Connector(_Strict):
    """The Kafka Connect connector that moves a tier's records (docs/connect.md): on a topic
    tier, the source connector writing it (Debezium); on a SQL or table tier right after a
    topic, the sink connector loading it. kafka-recon reads its config, status and offsets
    through the Connect cluster's REST API, never changes them."""
    name: str = Field(min_length=1)
    """The connector's name in its Connect cluster."""
    url: str | None = None
    """The Connect cluster's REST API (http://connect:8083); or `conn`."""
    conn: str | None = None
    """An Airflow HTTP connection to the Connect cluster's REST API (host, port, schema
    http/https, login and password for basic auth)."""
    dead_letter_topic: str | None = None
    """A sink connector's dead-letter queue topic, when its config does not say it
    (`errors.deadletterqueue.topic.name` is read from the connector's config first)."""
    group: str | None = None
    """A sink connector's consumer group when overridden (`consumer.override.group.id`);
    default `connect-<name>`."""

    @field_validator("url")
    @classmethod
    def _http(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError(f"expected the Connect REST API's address, http:// or https://, "
                             f"got {v!r}")
        return v

    def model_post_init(self, __context: Any) -> None:
        if not self.url and not self.conn:
            raise ValueError("connector: give 'url' (the Connect REST API) or 'conn' (an "
                             "Airflow HTTP connection)")

    @property
    def consumer_group(self) -> str:
        """The sink connector's consumer group."""
        return self.group or f"connect-{self.name}"


class SqlTier(_Strict):
    name: str
    """The tier's name, unique in the flow: it names the tier in hops, findings and id files."""
    type: Literal["sql"]
    """sql: a table read through SQLAlchemy (staging) and JDBC (Spark)."""
    tolerance: Tolerance | None = None  # for the hop into this tier (else the flow's)
    connector: Connector | None = None
    """The sink connector that loads this tier from the topic before it (Kafka Connect)."""
    conn: str = Field(description="Airflow connection id or SQLAlchemy URL")
    ids: str | None = None
    """A query returning `id` and `event_time` for the window, using :start and :end: the tier is
    counted record by record."""
    counts: str | None = None
    """Instead of `ids`: a query returning `bucket` and `count` for the window, using :start and
    :end: the tier is counted per bucket."""
    slices: int | None = Field(None, ge=1, le=64)
    """How many parallel event-time queries Spark reads the `ids` in, plus one for the rows they
    miss (unset: 2). Without an index on the query's event time each query scans the table: raise
    it only for an indexed table, and to no more than the Spark cores that read it."""

    @field_validator("ids", "counts")
    @classmethod
    def _window_params(cls, v: str | None) -> str | None:
        if v is not None and not (":start" in v and ":end" in v):
            raise ValueError("the query must use both :start and :end to select the window")
        return v

    def model_post_init(self, __context: Any) -> None:
        if (self.ids is None) == (self.counts is None):
            raise ValueError("give exactly one of 'ids' or 'counts'")
        if self.slices is not None and self.ids is None:
            raise ValueError("'slices' splits the 'ids' query: a 'counts' tier is not sliced")


TableFormat = Literal["iceberg", "delta", "parquet"]
# what a Delta table needs of the session, set when it starts (Delta reads nothing without it)
DELTA_SPARK = {"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
               "spark.sql.catalog.spark_catalog":
                   "org.apache.spark.sql.delta.catalog.DeltaCatalog"}


class TableTier(_Strict):
    """A lakehouse table or Parquet files, read by Spark (never staged): the window is a
    predicate on the event-time column, so a table partitioned by time can skip the rest."""
    name: str
    """The tier's name, unique in the flow: it names the tier in hops, findings and id files."""
    type: Literal["table"]
    """table: an Iceberg or Delta table, or Parquet files, read by Spark."""
    tolerance: Tolerance | None = None  # for the hop into this tier (else the flow's)
    connector: Connector | None = None
    """The sink connector that loads this table from the topic before it (Kafka Connect)."""
    format: TableFormat
    """iceberg (a table of a catalog), delta (a table's path), parquet (a path or glob)."""
    table: str = Field(min_length=1)
    """iceberg: `<catalog>.<namespace>.<table>`; delta and parquet: the path (a folder,
    `s3://bucket/prefix`)."""
    id: str = "id"
    """The id column."""
    event_time: str = "event_time"
    """The event-time column: a timestamp, a date, or ISO 8601 text."""
    catalog: dict[str, str] = {}
    """iceberg: the catalog's properties (`type: hadoop`, `warehouse: ...`; `type: jdbc`,
    `uri: ...`), set as `spark.sql.catalog.<catalog>.*`. Empty: the cluster configures the
    catalog itself."""
    as_of: int | None = None
    """Read the table as it was: an Iceberg snapshot id or a Delta version (a result names the
    one it read). Unset: the table's current state."""

    @property
    def catalog_name(self) -> str:
        return self.table.split(".")[0]

    def model_post_init(self, __context: Any) -> None:
        if self.format == "iceberg" and len(self.table.split(".")) < 3:
            raise ValueError(f"an iceberg table is <catalog>.<namespace>.<table>, got "
                             f"{self.table!r}")
        if self.format != "iceberg" and self.catalog:
            raise ValueError("catalog: only an iceberg table has a catalog")
        if self.format == "parquet" and self.as_of is not None:
            raise ValueError("as_of: Parquet files have no versions to read")

    def spark_settings(self) -> dict[str, str]:
        """What the Spark session needs to read the table."""
        if self.format == "delta":
            return dict(DELTA_SPARK)
        if self.format == "iceberg" and self.catalog:
            c = f"spark.sql.catalog.{self.catalog_name}"
            return {c: "org.apache.iceberg.spark.SparkCatalog",
                    **{f"{c}.{k}": v for k, v in self.catalog.items()}}
        return {}


class FlumeTier(_Strict):
    name: str
    """The tier's name, unique in the flow; its counting points are `<name>.source` and
    `<name>.sink`."""
    type: Literal["flume"]
    """flume: an Apache Flume agent, counted from its HTTP metrics between snapshots."""
    tolerance: Tolerance | None = None
    """The tolerance of the hops into this tier's points (else the flow's)."""
    metrics_url: str
    """The agent's JSON metrics (`-Dflume.monitoring.type=http`), e.g. http://host:41414/metrics."""
    source: str
    """The Flume source whose EventAcceptedCount counts records in."""
    sink: str
    """The Flume sink whose EventDrainSuccessCount counts records out."""


ClientProps = dict[str, str | int | float | bool]

# MirrorMaker 2's own topics (offset syncs, checkpoints, heartbeats, a dedicated cluster's
# configs/offsets/status): they hold no record of any flow, so reading one is a config mistake
MM2_INTERNAL = re.compile(r"^(mm2-offset-syncs\..+\.internal|.+\.checkpoints\.internal"
                          r"|(.+\.)?heartbeats|mm2-(configs|offsets|status)\..+\.internal)$")
HopKind = Literal["replication", "process"]


class KafkaTier(_Strict):
    name: str
    """The tier's name, unique in the flow."""
    type: Literal["kafka"]
    """kafka: a topic, replayed by fresh consumer groups."""
    bootstrap: str | None = None
    """The cluster's bootstrap servers; or `conn`, or both."""
    conn: str | None = None
    """An Airflow connection of type kafka whose extra is a librdkafka dict (bootstrap.servers,
    security.protocol, sasl.*, ssl.*)."""
    topic: str
    """The topic; for a mirror, the mirrored topic's name on its cluster (e.g. A.orders)."""
    schema_registry: str | None = None
    """The schema registry's URL for avro and json_schema records (else the connection's
    schema.registry.url); `mock://name` is confluent-kafka's in-process registry (tests)."""
    consumer_groups: list[str] = []
    """The production consumer groups reading the topic: their committed offsets tell a consume-
    side loss from retention, and are never touched."""
    isolation_level: Literal["read_committed", "read_uncommitted"] = "read_committed"
    """How the replay reads transactions: read_committed leaves aborted records out."""
    producer: ClientProps = {}
    """The flow's producer settings (no broker can see them), for the audit; or
    `producer_properties`."""
    consumer: ClientProps = {}
    """The flow's consumer settings, for the audit; or `consumer_properties`."""
    producer_properties: str | None = None
    """The producer .properties file of the application (relative to the flow config), for
    the audit."""
    consumer_properties: str | None = None
    """The consumer .properties file of the application (relative to the flow config), for
    the audit."""
    via: HopKind | None = None
    """For a topic fed by the topic before it: replication (MirrorMaker 2 or any mirror) or process
    (a consume-transform-produce processor)."""
    record: RecordSpec | None = None
    """Where this topic's records keep their id and time when a processor changed the value (else
    the flow's `record`)."""
    grace: Duration | None = None
    """How long after the window's end this topic's records may still arrive (a mirror lags); else
    the flow's grace."""
    tolerance: Tolerance | None = None  # for the hop into this topic (else the flow's)
    """The tolerance of the hop into this topic (else the flow's)."""
    mirror_properties: str | None = None
    """A MirrorMaker 2 properties file (mm2.properties) whose settings the audit checks."""
    drops: Drops | None = None
    """via: process only: the records of the topic before that the processor drops on purpose
    (`filtered`, not lost)."""
    connector: Connector | None = None
    """The source connector that writes this topic (Kafka Connect: Debezium, ...)."""

    @field_validator("topic")
    @classmethod
    def _not_mm2_internal(cls, v: str) -> str:
        if MM2_INTERNAL.match(v):
            raise ValueError(f"topic {v!r} is one of MirrorMaker 2's own topics (offset syncs, "
                             "checkpoints, heartbeats or its configs): it holds no flow "
                             "records; name the mirrored topic (e.g. 'A.orders')")
        return v

    def model_post_init(self, __context: Any) -> None:
        if not self.bootstrap and not self.conn:
            raise ValueError("give 'bootstrap', 'conn' (an Airflow Kafka connection) or both")
        if self.mirror_properties and self.via != "replication":
            raise ValueError("mirror_properties describe a mirror: set via: replication")
        if self.drops is not None and self.via != "process":
            raise ValueError("drops are what a processor filters out on purpose: set via: "
                             "process")


Tier = Annotated[SqlTier | FlumeTier | KafkaTier | TableTier, Field(discriminator="type")]


@dataclass(frozen=True)
class Point:
    """A place records are counted: a tier, or one end (source, sink) of a Flume tier."""

    name: str
    """The tier's name, unique in the flow."""
    tier: SqlTier | FlumeTier | KafkaTier | TableTier

    @property
    def exact(self) -> bool:
        """Counted id by id (anti-joins), rather than by counts per bucket."""
        return isinstance(self.tier, KafkaTier | TableTier) or (
            isinstance(self.tier, SqlTier) and self.tier.ids is not None)


VolumeCheck = Literal["off", "warn", "fail"]


class Volume(_Strict):
    """Each tier's volume judged against its own history, bucket by bucket (`check`, `width`,
    `days`, `references`); and, for flows with no upstream count, the whole window against
    the same weekday of trailing weeks (`weeks`, `band`, `min_history`)."""
    check: VolumeCheck = "warn"
    """What a bucket outside its band does: off (not judged), warn (a `volume` finding that
    leaves the window ok) or fail (a `volume` finding that fails it)."""
    width: float = Field(4.0, gt=0, le=20)
    """The band's half-width, in standard deviations of the day-to-day spread and the count's
    own noise (4: no false alarm in 28 seasonal days, docs/performance-history.md)."""
    days: int = Field(28, ge=7, le=120)
    """Trailing days the same bucket of the day is taken from."""
    references: int = Field(7, ge=3)
    """Past buckets of the same slot a band needs: with fewer, "not enough history yet"."""
    weeks: int = Field(4, ge=1, le=52)
    """How many trailing weeks of the same weekday the band is drawn from."""
    band: float = Field(0.3, gt=0, lt=1)  # each way, around the median of those windows
    """The band's half-width each way around the median of those windows (0.3: 30%)."""
    min_history: int = Field(2, ge=1)
    """Windows of history needed before the band is judged at all."""


class Freshness(_Strict):
    """How recent each tier's newest record of the window must be: a tier that stopped (a sink
    that stopped loading at 14:10) is found at the time it stopped, even when the tiers before
    it went quiet too."""
    check: VolumeCheck = "warn"
    """What a stale tier does: off, warn (a `freshness` finding that leaves the window ok) or
    fail (a finding that fails it)."""
    after: Duration | None = None
    """How long before the window's end a tier's newest record may be. Unset: the most its
    history's trusted windows showed, plus a bucket (not judged until `volume.references`
    windows are recorded). A topic is judged by its records' event times."""


AlertEvent = Literal["findings", "inconclusive", "recovery"]


class Alert(_Strict):
    """Where else the flow's owners hear of a window, beside the mail: an Airflow notifier
    over an Airflow connection (slack: an incoming webhook, `slackwebhook`; pagerduty: an
    Events API v2 integration, `pagerduty_events`)."""
    type: Literal["slack", "pagerduty"]
    """slack (an incoming webhook connection, `slackwebhook`) or pagerduty (an Events API v2
    connection, `pagerduty_events`)."""
    conn: str = Field(min_length=1)
    """The Airflow connection the notifier sends through."""
    # which windows it hears of: `recovery` is an ok window after one that was not (not
    # `on`: YAML reads that key as the boolean true)
    when: list[AlertEvent] = Field(["findings", "inconclusive"], min_length=1)
    """Which windows it hears of: findings, inconclusive, recovery (an ok window after one that was
    not)."""
    severity: Literal["critical", "error", "warning", "info"] = "error"
    """pagerduty: the severity of a findings event (an inconclusive one is a warning)."""


WRITE_SIDE = ("export", "json")


class Repair(_Strict):
    """How a window's lost records are re-delivered (`kafka-recon repair`, the recon_repair
    DAG): where to, and what a write-side loss's upstream rows become."""

    to: Literal["repair_topic", "topic"] = "repair_topic"
    """Where records are re-delivered: repair_topic (a topic beside each topic tier, which
    the sink team's consumer reads; `topics`), or topic (back onto the flow's own topic,
    where the sink's own consumer loads them unchanged; the record spec must read the event
    time from the record, not its Kafka timestamp)."""
    topics: dict[str, str] = {}
    """A repair topic per topic tier, by tier name: where that topic's lost records are
    published again (default `<topic>.kafka-recon-repair`)."""
    write_side: Literal["export", "publish"] = "export"
    """A write-side loss's upstream rows: export (kept in the plan's Parquet, for the owners),
    or publish (published in the topic's format, which the flow's record spec reads: the id
    and event time where it reads them, and `fields`; JSON as it is, Avro and JSON Schema with
    the registry's latest schema of `<topic>-value`, or Avro of the record's schema_file)."""
    fields: dict[str, str] = {}
    """With write_side publish, more value fields from the upstream row: JSON path
    ("$.amount", "$.customer.id") to the id query's column."""
    counted: bool = True
    """Whether a run counts the write-side records a topic's repair topic holds for its
    window as the topic's own (what verifies a write-side repair)."""
    settle: Duration = timedelta(minutes=10)
    """How long the recon_repair DAG waits after a delivery, for the sink to load the repair
    topic, before it re-runs the window to verify the repair."""

    @field_validator("fields")
    @classmethod
    def _paths(cls, v: dict[str, str]) -> dict[str, str]:
        for path in v:
            if not re.fullmatch(r"\$(\.[A-Za-z_][A-Za-z0-9_]*)+", path):
                raise ValueError(f'repair field {path!r}: expected a JSON path of plain names '
                                 'such as "$.amount" or "$.customer.id"')
        return v


class Flow(_Strict):
    name: str
    """The flow's name: the key under `flows:`."""
    owners: list[str] = Field(min_length=1)
    """Who receives the flow's report by mail, whether the run passed or not."""
    tags: list[str] = []  # Airflow tags of the flow's DAG, beside kafka-recon and flow:<name>
    """Airflow tags of the flow's DAG, beside kafka-recon and flow:<name>."""
    bucket: Duration = timedelta(hours=1)
    """The slice of the window that says when records went missing (a window shorter than 1h is its
    own bucket unless told)."""
    grace: Duration = timedelta(minutes=10)
    """How long after a window ends a record may still arrive: inside it, late; after it, lost."""
    disorder: Duration = timedelta(minutes=5)
    """How far a partition's Kafka timestamps may run out of order (several producers' clocks and
    batches): the replay reads this much beyond the window's offsets on both sides."""
    replays: int = Field(2, ge=1, le=10)
    """Replays of the topic, each by a fresh consumer group (1 to 10): agreeing replays make a
    write-side loss certain."""
    record: RecordSpec
    """Where a record's id and event time are, and how its value is decoded."""
    tiers: list[Tier] = Field(min_length=2)
    """The places the flow's records are counted, in flow order: sql, flume, kafka and table
    tiers, at least one kafka."""
    tolerance: Tolerance = Tolerance()
    """What a hop may show before its window fails (per tier: the tier's `tolerance`)."""
    volume: Volume = Volume()
    """Each tier's volume per bucket against its own history; and the whole-window band of
    flows with no upstream count."""
    freshness: Freshness = Freshness()
    """How recent each tier's newest record must be at the window's end."""
    alerts: list[Alert] = []
    """Where else the owners hear of a window: Slack, PagerDuty."""
    spark: dict[str, str] = {}
    """Spark settings for this flow's runs (`spark.executor.memory: 4g`, ...): over the Spark
    connection's extra `conf` and the cluster's `spark-defaults.conf`, over kafka-recon's own
    defaults (docs/cluster.md, "Spark's settings"). The time zone stays UTC whatever they say."""
    repair: Repair = Repair()
    """How lost records are re-delivered once an owner approves (docs/repair.md)."""
    window: Duration = timedelta(days=1)
    """The window of the flow's scheduled DAG: 1d, whole hours dividing a day, or whole minutes
    dividing an hour; the ad-hoc DAG takes any window."""

    @property
    def cluster(self) -> str:
        """The Kafka cluster the flow's replays read first: its first topic tier's connection
        id, else its bootstrap servers (the key of the replays' Airflow pool)."""
        first = next(t for t in self.tiers if isinstance(t, KafkaTier))
        return first.conn or first.bootstrap or ""

    @model_validator(mode="before")
    @classmethod
    def _bucket_within_window(cls, data: Any) -> Any:
        # a window shorter than the default bucket (1h) is its own bucket unless told
        if isinstance(data, dict) and "window" in data and "bucket" not in data:
            window = data["window"]
            window = parse_duration(window) if isinstance(window, str) else window
            if isinstance(window, timedelta) and window < timedelta(hours=1):
                return {**data, "bucket": window}
        return data

    @field_validator("spark", mode="before")
    @classmethod
    def _spark_settings(cls, v: Any) -> Any:
        if isinstance(v, dict):
            bad = [k for k in v if not str(k).startswith("spark.")]
            if bad:
                raise ValueError(f"{bad[0]!r} is not a Spark setting (each starts with 'spark.')")
            if "spark.sql.session.timeZone" in v:
                raise ValueError("spark.sql.session.timeZone: kafka-recon's runs are always UTC")
            return {str(k): str(v[k]).lower() if isinstance(v[k], bool) else str(v[k])
                    for k in v}
        return v

    @field_validator("window")
    @classmethod
    def _schedulable(cls, v: timedelta) -> timedelta:
        if schedule_of(v) is None:
            raise ValueError("expected 1d, whole hours dividing a day (1h, 2h, 3h, 4h, 6h, "
                             "8h, 12h) or whole minutes dividing an hour (5m, 10m, 15m, 30m, "
                             f"...), got {_shown(v)}")
        return v

    @field_validator("tiers")
    @classmethod
    def _one_topic(cls, tiers: list[Any]) -> list[Any]:
        names = [t.name for t in tiers]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"tier names must be unique, repeated: {', '.join(repeated)}")
        kafka = [t for t in tiers if isinstance(t, KafkaTier)]
        if not kafka:
            raise ValueError("a flow needs at least one tier of type kafka")
        for before, t in zip(tiers, tiers[1:], strict=False):
            fed = isinstance(before, KafkaTier) and isinstance(t, KafkaTier)
            if fed and t.via is None:
                raise ValueError(f"tier '{t.name}' follows topic tier '{before.name}': say how "
                                 "records get there, via: replication (a mirror such as "
                                 "MirrorMaker 2) or via: process (a processor)")
            if not fed and isinstance(t, KafkaTier) and t.via is not None:
                raise ValueError(f"tier '{t.name}': 'via' names the hop from a topic tier "
                                 "right before it, and there is none")
        for before, t in zip([None, *tiers], tiers, strict=False):
            c = getattr(t, "connector", None)
            if c is None or isinstance(t, KafkaTier):
                if c is not None and c.dead_letter_topic:
                    raise ValueError(f"tier '{t.name}': a source connector has no dead-letter "
                                     "queue to read (dead_letter_topic is a sink's)")
                continue
            if not isinstance(before, KafkaTier):
                raise ValueError(f"tier '{t.name}': its connector is a sink connector, which "
                                 "loads the topic tier right before it, and there is none")
        if isinstance(tiers[0], KafkaTier) and tiers[0].via is not None:
            raise ValueError(f"tier '{tiers[0].name}': 'via' names the hop from a topic tier "
                             "right before it, and there is none")
        where = [((t.bootstrap or t.conn), t.topic) for t in kafka]
        twice = sorted({f"{b}/{tp}" for b, tp in where if where.count((b, tp)) > 1})
        if twice:
            raise ValueError(f"the same topic is named by two tiers: {', '.join(twice)}")
        return tiers

    def model_post_init(self, __context: Any) -> None:
        if self.bucket > self.window:
            raise ValueError(f"bucket {_shown(self.bucket)} is longer than the window "
                             f"{_shown(self.window)}")
        for t in self.kafka_tiers:
            if self.drops_after(t) is not None and self.record_of(t).envelope == "debezium":
                raise ValueError(f"tier '{t.name}' holds debezium change events; the drops "
                                 "of the processor after it read fields of plain records")
        self._repair_fits()

    def _repair_fits(self) -> None:
        names = {t.name for t in self.kafka_tiers}
        if self.repair.to == "topic":
            if self.repair.topics:
                raise ValueError("repair.topics names repair topics, but repair.to: topic puts "
                                 "records back onto the flow's own topics: set one of them")
            for t in self.kafka_tiers:
                if self.record_of(t).event_time == "kafka_timestamp":
                    raise ValueError(
                        f"repair.to: topic: tier '{t.name}' reads its event time from the "
                        "Kafka timestamp, and a record put back onto its topic is stamped "
                        "when it is re-delivered, so it would count in another window: read "
                        "the event time from the record, or use repair.to: repair_topic")
        for name in self.repair.topics:
            if name not in names:
                raise ValueError(f"repair.topics names '{name}', which is not a topic tier "
                                 f"of the flow ({', '.join(sorted(names))})")
        if self.repair.write_side == "publish":
            rec = self.record_of(self.topic_tier)
            if rec.envelope != "none":
                raise ValueError("repair.write_side publish writes plain records; the first "
                                 f"topic's records are {rec.envelope} change events: use "
                                 "write_side export")
        elif self.repair.fields:
            raise ValueError("repair.fields shape published records: set "
                             "repair.write_side: publish")

    @property
    def kafka_tiers(self) -> list[KafkaTier]:
        """The flow's topics, in flow order."""
        return [t for t in self.tiers if isinstance(t, KafkaTier)]

    @property
    def table_tiers(self) -> list[TableTier]:
        return [t for t in self.tiers if isinstance(t, TableTier)]

    @property
    def spark_settings(self) -> dict[str, str]:
        """The Spark settings of this flow's runs: what its tables need, under its `spark:`."""
        needed: dict[str, str] = {}
        for t in self.table_tiers:
            needed.update(t.spark_settings())
        return {**needed, **self.spark}

    @property
    def topic_tier(self) -> KafkaTier:
        """The first topic: the one the upstream writes to."""
        return self.kafka_tiers[0]

    def record_of(self, tier: KafkaTier) -> RecordSpec:
        """Where a topic's records keep their id and time: its own `record`, else the flow's."""
        return tier.record or self.record

    @property
    def connectors(self) -> dict[str, Connector]:
        """Each tier's connector, by tier name (sources on topics, sinks after them)."""
        return {t.name: c for t in self.tiers
                if (c := getattr(t, "connector", None)) is not None}

    def loaded_topic(self, tier_name: str) -> KafkaTier | None:
        """The topic tier right before a tier: what its sink connector loads (None: the tier
        follows no topic)."""
        names = [t.name for t in self.tiers]
        at = names.index(tier_name)
        before = self.tiers[at - 1] if at else None
        return before if isinstance(before, KafkaTier) else None

    def sink_connector(self, tier_name: str) -> Connector | None:
        """The sink connector loading a SQL or table tier, if declared."""
        t = next((t for t in self.tiers if t.name == tier_name), None)
        return t.connector if isinstance(t, SqlTier | TableTier) else None

    def drops_after(self, tier: KafkaTier) -> Drops | None:
        """What the processor reading this topic drops on purpose (the next tier's `drops`)."""
        i = self.tiers.index(tier)
        after = self.tiers[i + 1] if i + 1 < len(self.tiers) else None
        return after.drops if isinstance(after, KafkaTier) else None

    def grace_of(self, tier: KafkaTier) -> timedelta:
        return tier.grace if tier.grace is not None else self.grace

    @property
    def longest_grace(self) -> timedelta:
        """When the whole flow's window has closed: the slowest topic's grace."""
        return max([self.grace, *(self.grace_of(t) for t in self.kafka_tiers)])

    @property
    def closing(self) -> timedelta:
        """How long after a window's end it is closed for counting (its closing time): the
        longest grace, plus the disorder margin the replay reads beyond it (a record of the
        window whose producer's clock lags may be appended that much later)."""
        return self.longest_grace + self.disorder

    def tolerance_into(self, point: str) -> Tolerance:
        """The tolerance of the hop into a point: its tier's own, else the flow's."""
        tier = next(p.tier for p in self.points if p.name == point)
        return tier.tolerance or self.tolerance

    @property
    def points(self) -> list[Point]:
        """Where records are counted, in flow order: each tier, and a Flume tier twice."""
        out: list[Point] = []
        for t in self.tiers:
            if isinstance(t, FlumeTier):
                out += [Point(f"{t.name}.source", t), Point(f"{t.name}.sink", t)]
            else:
                out.append(Point(t.name, t))
        return out

    def side_of(self, upstream_point: str) -> str:
        """The side of the hop from a point to the next (docs/design.md's sides, and docs/flows.md's
        for chains of topics): `write` up to and into a topic from outside Kafka,
        `replication` or `process` from one topic into the next (its `via`), `consume` out of
        a topic, and beyond it."""
        points = self.points
        i = [p.name for p in points].index(upstream_point)
        a, b = points[i].tier, points[i + 1].tier if i + 1 < len(points) else None
        if isinstance(b, KafkaTier) and b.via is not None and isinstance(a, KafkaTier):
            return b.via
        if isinstance(b, KafkaTier):
            return "write"
        if isinstance(a, KafkaTier):
            return "consume"
        # between two tiers outside Kafka: before the first topic, records are still on
        # their way in
        first = [p.name for p in points].index(self.topic_tier.name)
        return "write" if i < first else "consume"


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML silently keeps the last of two equal keys; two flows with one name must fail."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise ConfigError(
                f"line {key_node.start_mark.line + 1}: key {key!r} appears twice "
                f"(first on line {seen[key]})"
            )
        seen[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping
)


class _Unset(Exception):
    """A `${VAR}` with no value and no default, at `field` of the flow."""

    def __init__(self, field: str, var: str) -> None:
        super().__init__(field, var)
        self.field, self.var = field, var


def _expand_env(value: Any, field: str) -> Any:
    if isinstance(value, str):
        def sub(m: re.Match[str]) -> str:
            var, default = m.group(1), m.group(2)
            if var in os.environ:
                return os.environ[var]
            if default is not None:
                return default
            raise _Unset(field, var)
        return _ENV.sub(sub, value)
    if isinstance(value, list):
        return [_expand_env(v, f"{field}.{i}") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: _expand_env(v, f"{field}.{k}" if field else str(k)) for k, v in value.items()}
    return value


def _invalid(path: Path, flow: str, exc: ValidationError) -> FlowInvalid:
    """A flow's validation errors: one line per field, and each field with its message."""
    fields = tuple((".".join(str(p) for p in err["loc"]) or "(flow)", err["msg"])
                   for err in exc.errors())
    return FlowInvalid("\n".join(f"{path}: flow '{flow}', field '{f}': {m}" for f, m in fields),
                       flow, fields)


def _raw_flows(path: Path) -> dict[Any, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the flow config: {exc.strerror}") from exc
    try:
        raw = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict) or set(raw) != {"flows"} or not isinstance(raw["flows"], dict):
        raise ConfigError(f"{path}: expected a mapping with the single key 'flows: {{name: ...}}'")
    return raw["flows"]


def _one_flow(path: Path, name: str, body: Any) -> Flow:
    if not isinstance(body, dict):
        raise FlowInvalid(f"{path}: flow '{name}': expected a mapping of fields", name,
                          (("(flow)", "expected a mapping of fields"),))
    try:
        body = _expand_env(body, "")
    except _Unset as unset:
        what = f"environment variable {unset.var} is not set and has no default"
        raise FlowInvalid(f"{path}: flow '{name}', field '{unset.field}': {what}", name,
                          ((unset.field, what),)) from None
    record = body.get("record")
    if isinstance(record, dict) and isinstance(record.get("schema_file"), str):
        # like the apps' properties files: relative to the flow config's folder
        body["record"] = {**record, "schema_file": str(path.parent / record["schema_file"])}
    tiers = body.get("tiers")
    if isinstance(tiers, list):  # a mirror's properties, like a schema file: beside the config
        body["tiers"] = [{**t, "mirror_properties": str(path.parent / t["mirror_properties"])}
                         if isinstance(t, dict) and isinstance(t.get("mirror_properties"), str)
                         else t for t in tiers]
    try:
        return Flow(name=name, **body)
    except ValidationError as exc:
        raise _invalid(path, name, exc) from None
    except ValueError as exc:
        raise FlowInvalid(f"{path}: flow '{name}': {exc}", name, (("(flow)", str(exc)),)) \
            from None


def load_flows(path: Path | str) -> dict[str, Flow]:
    """Read and validate every flow of a config file; the first bad flow is an error. For a
    face that works on all flows, `load_flows_partial`; for one flow, `load_flow`."""
    flows, errors = load_flows_partial(path)
    if errors:
        raise next(iter(errors.values()))
    return flows


def load_flows_partial(path: Path | str) -> tuple[dict[str, Flow], dict[str, ConfigError]]:
    """Every valid flow, and for each bad one its error (a `FlowInvalid`): one bad flow must
    not take the others with it. A file that cannot be read at all is an error of `(file)`."""
    path = Path(path)
    try:
        raw = _raw_flows(path)
    except ConfigError as exc:
        return {}, {"(file)": exc}
    flows: dict[str, Flow] = {}
    errors: dict[str, ConfigError] = {}
    for name, body in raw.items():
        try:
            flows[str(name)] = _one_flow(path, str(name), body)
        except ConfigError as exc:
            errors[str(name)] = exc
    return flows, errors


def load_flow(path: Path | str, name: str) -> Flow:
    """One flow, validated alone: another flow's mistake in the same file is not its error
    (a file that cannot be read at all is)."""
    path = Path(path)
    raw = {str(k): v for k, v in _raw_flows(path).items()}
    if name not in raw:
        known = ", ".join(sorted(raw)) or "none"
        raise ConfigError(f"{path}: no flow named '{name}' (flows: {known})")
    return _one_flow(path, name, raw[name])
