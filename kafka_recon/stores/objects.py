"""The runs root in an object store: `KAFKA_RECON_OUT=s3://[<connection id>@]bucket/prefix`.

The connection id in the URL is Airflow's own convention (`ObjectStoragePath`): an Airflow
connection of type `aws` whose login and password are the access key and its secret, and whose
extra may hold `endpoint_url` (any S3-compatible store: MinIO, Ceph, s3proxy) and
`region_name`. Without one, the AWS SDKs' own chain (environment, profile, instance role)
applies.

The driver reaches the store through fsspec (s3fs), the Spark executors through Hadoop's S3A
connector (`make jars`, profile `s3`): both are given the same connection, the executors by the
session's settings (never on the command line, where `ps` would show the secret).

A store that does not answer is a `StoreUnreachable` naming it: the run is inconclusive, never
half-written as ok.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from upath import UPath

from kafka_recon.errors import ConfigError
from kafka_recon.runfolder import unreachable
from kafka_recon.settings import runs_location
from kafka_recon.settings import runs_root as local_runs_root
from kafka_recon.sources.connections import handed_fields, resolve_fields

SUPPORTED = ("s3",)
# S3-compatible stores do not all take the checksums the AWS SDKs send since early 2025 (boto3
# 1.36, Java SDK 2.30): only where S3 requires one, as before; AWS accepts both
_BOTO_CONFIG = {"request_checksum_calculation": "when_required",
                "response_checksum_validation": "when_required"}


def _parts(location: str) -> tuple[str, str | None, str, str]:
    """scheme, connection id, bucket, key prefix of `s3://[conn@]bucket/prefix`."""
    u = urlsplit(location)
    if u.scheme not in SUPPORTED:
        raise ConfigError(f"runs root {location}: '{u.scheme}://' is not supported "
                          f"(supported: {', '.join(s + '://' for s in SUPPORTED)}, a local "
                          "folder)")
    if not u.hostname:
        raise ConfigError(f"runs root {location}: no bucket")
    return u.scheme, u.username or None, u.hostname, u.path.strip("/")


def _conn() -> str | None:
    location = runs_location()
    return _parts(location)[1] if "://" in location else None


def storage_options(conn: str | None) -> dict[str, Any]:
    """s3fs's options for the connection (none: the AWS SDK's own credential chain)."""
    options: dict[str, Any] = {"config_kwargs": dict(_BOTO_CONFIG)}
    if conn is None:
        return options
    f = resolve_fields(conn)
    extra = f["extra"]
    key = f["login"] or extra.get("aws_access_key_id")
    secret = f["password"] or extra.get("aws_secret_access_key")
    if key and secret:
        options.update(key=key, secret=secret)
    if extra.get("aws_session_token"):
        options["token"] = extra["aws_session_token"]
    endpoint = extra.get("endpoint_url") or f["host"]
    if endpoint:
        options["endpoint_url"] = endpoint
    if extra.get("region_name"):
        options["client_kwargs"] = {"region_name": extra["region_name"]}
    return options


def at(location: str | Path | UPath) -> UPath:
    """A path as a run folder's: local, or in the runs root's object store with its
    connection (a Spark job is handed its run folder as text)."""
    if isinstance(location, UPath):
        return location
    text = str(location)
    if "://" not in text or text.startswith("file://"):
        return UPath(Path(text.removeprefix("file://")))
    scheme, conn, bucket, key = _parts(text)
    return UPath(f"{scheme}://{bucket}/{key}", **storage_options(conn or _conn()))


def runs_root() -> UPath:
    """The runs root: a local folder unless KAFKA_RECON_OUT names an object store."""
    location = runs_location()
    return at(location) if "://" in location else UPath(local_runs_root())


def check(root: UPath) -> None:
    """The runs root answers (listing it): a `StoreUnreachable` naming it otherwise."""
    try:
        root.fs.ls(root.path, detail=False)
    except FileNotFoundError:
        pass  # an empty prefix is a root not yet written to
    except Exception as exc:  # botocore's and aiohttp's errors, OSError
        raise unreachable(root, exc) from None


def spark_settings(path: UPath) -> dict[str, str]:
    """Hadoop's S3A settings for this path's bucket, set on the Spark session (never on the
    command line): the executors write the id files and replays straight to the store."""
    if path.protocol not in SUPPORTED:
        return {}
    bucket = path.path.split("/")[0]
    options = path.storage_options
    prefix = f"fs.s3a.bucket.{bucket}."
    out = {
        # s3:// paths are read and written through S3A, as EMR and Databricks users expect
        "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        # one DELETE per object, as the driver does: not every S3-compatible store takes S3's
        # multi-object delete
        f"{prefix}multiobjectdelete.enable": "false",
    }
    if options.get("endpoint_url"):
        out[f"{prefix}endpoint"] = options["endpoint_url"]
        # an endpoint of its own is rarely a virtual-host name server: bucket in the path
        out[f"{prefix}path.style.access"] = "true"
        out[f"{prefix}connection.ssl.enabled"] = str(
            options["endpoint_url"].startswith("https")).lower()
    region = (options.get("client_kwargs") or {}).get("region_name")
    if region:
        out[f"{prefix}endpoint.region"] = region
    if options.get("key"):
        out[f"{prefix}access.key"] = options["key"]
        out[f"{prefix}secret.key"] = options["secret"]
        out[f"{prefix}aws.credentials.provider"] = (
            "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider")
    return out


def for_spark() -> dict[str, str]:
    """What a Spark job started from here needs of the runs root: its connection, handed in
    `KAFKA_RECON_CONN_<ID>` (resolved here, in the Airflow task)."""
    conn = _conn()
    return handed_fields([conn]) if conn else {}

