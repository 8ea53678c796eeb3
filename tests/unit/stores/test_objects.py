"""The runs root in an object store: `s3://<conn>@bucket/prefix` read as Airflow's
ObjectStoragePath reads it, the connection's credentials given to s3fs and to Spark's S3A (per
bucket, never on a command line), and what is not a supported store refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_recon.errors import ConfigError, ConnectionNotFound
from kafka_recon.stores import objects

pytestmark = pytest.mark.unit

CONN = json.dumps({"conn_type": "aws", "login": "AKIA1", "password": "s3cret",
                   "extra": {"endpoint_url": "http://10.0.0.5:9000", "region_name": "eu-west-1"}})


def test_an_s3_runs_root_carries_its_connections_credentials_and_endpoint(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_RECON_OUT", "s3://recon_s3@bucket-a/team/runs")
    monkeypatch.setenv("AIRFLOW_CONN_RECON_S3", CONN)
    root = objects.runs_root()
    assert (root.protocol, root.path) == ("s3", "bucket-a/team/runs")
    assert str(root) == "s3://bucket-a/team/runs"  # no connection id, no secret in its name
    opts = root.storage_options
    assert (opts["key"], opts["secret"], opts["endpoint_url"]) == (
        "AKIA1", "s3cret", "http://10.0.0.5:9000")
    assert opts["client_kwargs"] == {"region_name": "eu-west-1"}
    # a run folder handed to a Spark job as text gets the root's connection back
    folder = objects.at("s3://bucket-a/team/runs/f/w")
    assert folder.storage_options["secret"] == "s3cret"


def test_spark_reaches_the_bucket_through_s3a_with_the_same_connection(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_RECON_OUT", "s3://recon_s3@bucket-a/runs")
    monkeypatch.setenv("AIRFLOW_CONN_RECON_S3", CONN)
    conf = objects.spark_settings(objects.runs_root())
    b = "fs.s3a.bucket.bucket-a."
    assert conf["fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert (conf[b + "endpoint"], conf[b + "path.style.access"],
            conf[b + "connection.ssl.enabled"]) == ("http://10.0.0.5:9000", "true", "false")
    assert (conf[b + "access.key"], conf[b + "secret.key"]) == ("AKIA1", "s3cret")
    assert conf[b + "endpoint.region"] == "eu-west-1"
    handed = objects.for_spark()
    assert json.loads(handed["KAFKA_RECON_CONN_RECON_S3"])["password"] == "s3cret"
    assert objects.spark_settings(objects.at("/tmp/runs")) == {}  # a local folder: nothing


def test_without_a_connection_the_sdks_own_credential_chain_applies(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_RECON_OUT", "s3://bucket-b/runs")
    opts = objects.runs_root().storage_options
    assert "key" not in opts and "endpoint_url" not in opts
    assert objects.for_spark() == {}


@pytest.mark.parametrize("location, message", [
    ("gs://bucket/runs", "runs root gs://bucket/runs: 'gs://' is not supported (supported: "
                         "s3://, a local folder)"),
    ("s3:///runs", "runs root s3:///runs: no bucket"),
])
def test_a_runs_root_that_is_not_a_supported_store_is_refused_in_one_line(
        monkeypatch: pytest.MonkeyPatch, location: str, message: str) -> None:
    monkeypatch.setenv("KAFKA_RECON_OUT", location)
    with pytest.raises(ConfigError) as err:
        objects.runs_root()
    assert str(err.value) == message


def test_an_unknown_connection_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_RECON_OUT", "s3://nowhere_conn@bucket/runs")
    with pytest.raises(ConnectionNotFound) as err:
        objects.runs_root()
    assert str(err.value).startswith("connection 'nowhere_conn': neither set as "
                                     "AIRFLOW_CONN_NOWHERE_CONN")


def test_a_local_runs_root_stays_a_plain_path(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_RECON_OUT", f"file://{tmp_path}")
    root = objects.runs_root()
    assert isinstance(root, Path) and root == tmp_path


def test_the_store_must_be_a_database_when_the_runs_root_is_an_object_store(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_recon.stores.database import store_url

    monkeypatch.delenv("KAFKA_RECON_STORE", raising=False)
    monkeypatch.delenv("KAFKA_RECON_HISTORY", raising=False)
    monkeypatch.setenv("KAFKA_RECON_OUT", "s3://bucket/runs")
    with pytest.raises(ConfigError) as err:
        store_url()
    assert "set KAFKA_RECON_STORE to a database every host reaches" in str(err.value)
