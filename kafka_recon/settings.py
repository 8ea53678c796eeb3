"""Every setting kafka-recon reads from the environment, in one place.

| variable | default | what |
|---|---|---|
| KAFKA_RECON_CONFIG | `<repo>/config/flows.yaml` | the flow config |
| KAFKA_RECON_OUT | `<repo>/runs` | the runs root: one folder per flow and window |
| KAFKA_RECON_JARS | `<repo>/.jars` | the jars Maven resolved (kafka/, spark/, lineage/, ...) |
| KAFKA_RECON_SPARK_JOBS | `<repo>/spark_jobs` | the spark-submit entry points |
| KAFKA_RECON_EXPECTATIONS | `<repo>/expectations/gx` | the Great Expectations context |
| KAFKA_RECON_HISTORY | `sqlite:///<runs>/history.db` | history database: URL or connection id |
| KAFKA_RECON_SNAPSHOTS | `<runs>/snapshots.db` | snapshot store: Flume counters, flight recorder |
| KAFKA_RECON_SNAPSHOT_RETENTION_DAYS | 14 | how long the flight recorder's snapshots are kept |
| KAFKA_RECON_UI_URL | none | Airflow's address, for links in mails |
| KAFKA_RECON_METRICS_TOKEN | none | the bearer token a scraper may use for /recon/metrics |
| KAFKA_RECON_MAIL_ATTACH_MAX_BYTES | 5 MiB | id files attached to a mail, in total |
| KAFKA_RECON_TASK_RETRIES | 2 | retries of a task on an error a retry may clear (never a verdict) |
| KAFKA_RECON_RUN_STALE_HOURS | 6 | a run of a window silent this long no longer holds it |
| KAFKA_RECON_JVM_OPTIONS | see `DEFAULT_JVM_OPTIONS` | Spark's JVMs' options (empty: defaults) |
| KAFKA_RECON_CLASS_ARCHIVE | `<jars>/spark-classes.jsa` | Spark driver's class archive ('': none) |
| KAFKA_RECON_SPARK_REMOTE | none | a Spark Connect server (`sc://host:port`) for `run` |
| KAFKA_RECON_KEEP_REPLAYS | 0 | 1: also keep the first replay's records as Parquet (debugging) |
| KAFKA_RECON_CONN_<ID> | none | a connection resolved for Spark by the Airflow task (internal) |
| KAFKA_RECON_RUN_OWNER | none | the Airflow run a Spark job belongs to (internal) |

A value that cannot be used is a `UsageError` naming the variable.
"""

from __future__ import annotations

import os
from pathlib import Path

from kafka_recon.errors import MissingJarsError, UsageError

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_ATTACH_MAX_BYTES = 5 * 1024 * 1024


def _path(var: str, default: Path) -> Path:
    value = os.environ.get(var)
    return Path(value) if value else default


def config_path() -> Path:
    return _path("KAFKA_RECON_CONFIG", REPO_ROOT / "config" / "flows.yaml")


def runs_root() -> Path:
    return _path("KAFKA_RECON_OUT", REPO_ROOT / "runs")


def jars_dir() -> Path:
    return _path("KAFKA_RECON_JARS", REPO_ROOT / ".jars")


def spark_jobs_dir() -> Path:
    return _path("KAFKA_RECON_SPARK_JOBS", REPO_ROOT / "spark_jobs")


def expectations_dir() -> Path:
    return _path("KAFKA_RECON_EXPECTATIONS", REPO_ROOT / "expectations" / "gx")


def history_conn() -> str | None:
    """An SQLAlchemy URL or a connection id; None: SQLite in the runs root."""
    return os.environ.get("KAFKA_RECON_HISTORY") or None


def snapshots_path() -> Path:
    legacy = runs_root() / "flume.db"  # the store's name before it also held the recorder's
    default = runs_root() / "snapshots.db"
    return _path("KAFKA_RECON_SNAPSHOTS",
                 legacy if legacy.exists() and not default.exists() else default)


def metrics_token() -> str | None:
    return os.environ.get("KAFKA_RECON_METRICS_TOKEN") or None


def ui_url() -> str | None:
    return os.environ.get("KAFKA_RECON_UI_URL") or None


def _count(var: str, default: int) -> int:
    raw = os.environ.get(var, str(default))
    try:
        value = int(raw)
    except ValueError:
        raise UsageError(f"{var}={raw!r}: expected a whole number") from None
    if value < 0:
        raise UsageError(f"{var}={raw!r}: must not be negative")
    return value


def mail_attach_max_bytes() -> int:
    return _count("KAFKA_RECON_MAIL_ATTACH_MAX_BYTES", DEFAULT_ATTACH_MAX_BYTES)


def task_retries() -> int:
    return _count("KAFKA_RECON_TASK_RETRIES", 2)


def snapshot_retention_days() -> int:
    return _count("KAFKA_RECON_SNAPSHOT_RETENTION_DAYS", 14)


def run_stale_hours() -> int:
    return _count("KAFKA_RECON_RUN_STALE_HOURS", 6)


# kafka_recon.spark.session says why these HotSpot options, measured by bench.tune
DEFAULT_JVM_OPTIONS = "-XX:+UseParallelGC -XX:CompileThresholdScaling=3"


def jvm_options() -> str:
    """The Spark JVMs' options beside the UTC time zone: `KAFKA_RECON_JVM_OPTIONS` (empty: the
    JVM's own defaults), else kafka-recon's measured ones."""
    raw = os.environ.get("KAFKA_RECON_JVM_OPTIONS", DEFAULT_JVM_OPTIONS).strip()
    bad = [o for o in raw.split() if not o.startswith("-")]
    if bad:
        raise UsageError(f"KAFKA_RECON_JVM_OPTIONS={raw!r}: {bad[0]!r} is not a JVM option "
                         "(each starts with '-')")
    return raw


def spark_remote(given: str | None = None) -> str | None:
    """The Spark Connect server a run uses instead of a Spark of its own: `given` (the command
    line's --remote), else `KAFKA_RECON_SPARK_REMOTE`; None: the run starts its own Spark."""
    from urllib.parse import urlsplit

    raw = (given if given is not None else os.environ.get("KAFKA_RECON_SPARK_REMOTE", "")).strip()
    if not raw:
        return None
    where = "--remote" if given is not None else "KAFKA_RECON_SPARK_REMOTE"
    try:
        url = urlsplit(shown_remote(raw))
        good = url.scheme == "sc" and bool(url.hostname) and url.port != 0
    except ValueError:  # a port that is not one
        good = False
    if not good:
        raise UsageError(f"{where}={shown_remote(raw)!r}: expected a Spark Connect URL, "
                         "sc://host:port")
    return raw


def shown_remote(url: str) -> str:
    """A Spark Connect URL fit for a message or a log: what follows /; (a token) left out."""
    return url.split("/;", 1)[0]


def class_archive_path() -> Path | None:
    """Where the Spark driver's class archive is (`kafka_recon.spark.classes`), made or not:
    `KAFKA_RECON_CLASS_ARCHIVE`, empty for none, else `spark-classes.jsa` among the jars."""
    raw = os.environ.get("KAFKA_RECON_CLASS_ARCHIVE")
    if raw is None:
        return jars_dir() / "spark-classes.jsa"
    return Path(raw) if raw.strip() else None


def keep_replays() -> bool:
    """Keep the first replay's records on disk even when the reconcile reads them in memory."""
    raw = os.environ.get("KAFKA_RECON_KEEP_REPLAYS", "0")
    if raw not in ("0", "1"):
        raise UsageError(f"KAFKA_RECON_KEEP_REPLAYS={raw!r}: expected 0 or 1")
    return raw == "1"


# the Airflow run a Spark job belongs to, handed in its environment like the connections
RUN_OWNER_VAR = "KAFKA_RECON_RUN_OWNER"


def run_owner() -> str | None:
    return os.environ.get(RUN_OWNER_VAR) or None


def conn_env_var(conn_id: str, prefix: str = "KAFKA_RECON_CONN_") -> str:
    """The variable a connection id is read from, spelled as Airflow spells AIRFLOW_CONN_<ID>;
    by default where an Airflow task hands a connection it resolved to its Spark job."""
    import re

    return prefix + re.sub(r"[^A-Za-z0-9]", "_", conn_id).upper()


def _jar_list(kind: str) -> list[Path]:
    folder = jars_dir() / kind
    jars = sorted(folder.glob("*.jar"))
    if not jars:
        raise MissingJarsError(
            f"no jars in {folder}: run `make jars` (Maven resolves them from Maven Central "
            f"through jvm/pom.xml, profile '{kind}'), or set KAFKA_RECON_JARS")
    return jars


def kafka_classpath() -> str:
    """Classpath of the Kafka broker and its tools."""
    return os.pathsep.join(str(j) for j in _jar_list("kafka"))


# kafka-recon's window reader (jvm/src), which `make reader` compiles into the Spark jars
READER_JAR = "kafka-recon-reader.jar"


def spark_jars() -> list[str]:
    """Local jars for Spark: the window reader, the Kafka client, the JDBC drivers (never
    --packages)."""
    jars = _jar_list("spark")
    if not any(j.name == READER_JAR for j in jars):
        raise MissingJarsError(
            f"no {READER_JAR} in {jars_dir() / 'spark'}: run `make reader` (javac compiles the "
            "replay's window reader from jvm/src against the installed PySpark's jars)")
    return [str(j) for j in jars]


def lineage_jars() -> list[str]:
    """The OpenLineage Spark listener, added to Spark's jars only when lineage is configured."""
    return [str(j) for j in _jar_list("lineage")]


def mirror_classpath() -> str:
    """Classpath of MirrorMaker 2 in dedicated mode (the drill's replication scenarios)."""
    return os.pathsep.join(str(j) for j in _jar_list("mirror"))


def flume_classpath() -> str:
    """Classpath of the Apache Flume agent (the drill's S10)."""
    return os.pathsep.join(str(j) for j in _jar_list("flume"))
