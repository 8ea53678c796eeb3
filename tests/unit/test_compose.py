"""docker-compose.yml: no Docker engine runs here, so its structure is what can be checked."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from kafka_recon.settings import REPO_ROOT

pytestmark = pytest.mark.unit

COMPOSE = REPO_ROOT / "docker-compose.yml"
AIRFLOW = ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return dict(yaml.safe_load(COMPOSE.read_text()))


def test_the_stack_has_kafka_a_registry_spark_airflow_postgres_and_mailpit(
        compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {
        "kafka-1", "kafka-2", "kafka-3", "schema-registry", "spark-master", "spark-worker",
        "postgres", "mailpit",
        "airflow-init", *AIRFLOW}


def _pinned(image: str) -> bool:
    name, _, tag = image.rpartition(":")
    return bool(name) and tag not in ("", "latest") and bool(re.search(r"\d", tag))


def test_every_image_is_pinned_to_a_version(compose: dict[str, Any]) -> None:
    for name, svc in compose["services"].items():
        assert _pinned(svc["image"]), f"{name}: {svc['image']}"
    base = re.findall(r"^FROM (\S+)", (REPO_ROOT / "docker" / "airflow.Dockerfile").read_text(),
                      re.M)
    assert base and all(_pinned(b) for b in base), base
    # the container runs the same Spark and Airflow as the lock
    lock = (REPO_ROOT / "requirements.lock").read_text()
    spark = re.search(r"^pyspark==(\S+)", lock, re.M)
    airflow = re.search(r"^apache-airflow==(\S+)", lock, re.M)
    assert spark and airflow
    assert compose["services"]["spark-master"]["image"].startswith(
        f"apache/spark:{spark.group(1)}-")
    assert base[0].startswith(f"apache/airflow:{airflow.group(1)}-")


def test_every_long_running_service_has_a_healthcheck(compose: dict[str, Any]) -> None:
    for name, svc in compose["services"].items():
        if name == "airflow-init":
            continue
        assert svc.get("healthcheck", {}).get("test"), name


def test_three_kraft_brokers_agree_on_one_quorum_with_their_own_ports(compose: dict[str, Any]
                                                                     ) -> None:
    kafka = {n: s for n, s in compose["services"].items() if n.startswith("kafka-")}
    voters = {s["environment"]["KAFKA_CONTROLLER_QUORUM_VOTERS"] for s in kafka.values()}
    assert voters == {"1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093"}
    assert sorted(s["environment"]["KAFKA_NODE_ID"] for s in kafka.values()) == [1, 2, 3]
    ports = [p for s in kafka.values() for p in s["ports"]]
    assert len(set(ports)) == 3
    for s in kafka.values():
        assert s["environment"]["KAFKA_MIN_INSYNC_REPLICAS"] == 2
        assert s["environment"]["KAFKA_UNCLEAN_LEADER_ELECTION_ENABLE"] == "false"


def test_airflow_services_share_their_environment_mounts_and_connections(
        compose: dict[str, Any]) -> None:
    mounts = {n: set(compose["services"][n]["volumes"]) for n in AIRFLOW}
    first = mounts[AIRFLOW[0]]
    assert all(m == first for m in mounts.values())
    assert first == {"./dags:/opt/airflow/dags:ro", "./config:/opt/kafka-recon/config:ro",
                     "logs:/opt/airflow/logs", "runs:/opt/kafka-recon/runs"}
    for n in AIRFLOW:
        env = compose["services"][n]["environment"]
        assert env["AIRFLOW__KAFKA_RECON__CONFIG"] == "/opt/kafka-recon/config/flows.yaml"
        assert env["AIRFLOW__KAFKA_RECON__RUNS"] == "/opt/kafka-recon/runs"
        assert "spark://spark-master" in env["AIRFLOW_CONN_SPARK_DEFAULT"]
        assert '"host": "mailpit"' in env["AIRFLOW_CONN_SMTP_DEFAULT"]
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].endswith("@postgres:5432/airflow")
        assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
        assert compose["services"][n]["user"] == "${AIRFLOW_UID:-50000}:0"
    # executors write id files into the run folder the Airflow side reads
    assert "runs:/opt/kafka-recon/runs" in compose["services"]["spark-worker"]["volumes"]
    assert {"runs", "logs", "postgres"} <= set(compose["volumes"])


def test_every_folder_or_file_it_mounts_exists_in_the_repository(compose: dict[str, Any]
                                                                 ) -> None:
    for name, svc in compose["services"].items():
        for volume in svc.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith((".", "/")):
                assert (REPO_ROOT / source).exists(), f"{name} mounts {source}"
    assert (REPO_ROOT / "config" / "flows.yaml").is_file()


def test_no_secret_has_a_default_the_fernet_key_and_jwt_secret_must_be_given(
        compose: dict[str, Any]) -> None:
    env = compose["x-airflow-common"]["environment"]
    for var in ("AIRFLOW__CORE__FERNET_KEY", "AIRFLOW__API_AUTH__JWT_SECRET"):
        assert re.fullmatch(rf"\$\{{{var}:\?[^}}]+\}}", env[var]), env[var]
    assert "change-me" not in COMPOSE.read_text()


def test_an_init_service_migrates_and_every_airflow_component_waits_for_it(
        compose: dict[str, Any]) -> None:
    init = compose["services"]["airflow-init"]
    assert init["environment"]["_AIRFLOW_DB_MIGRATE"] == "true"
    assert "chown" in init["command"][1] and "/entrypoint airflow version" in init["command"][1]
    for n in AIRFLOW:
        deps = compose["services"][n]["depends_on"]
        assert deps["airflow-init"] == {"condition": "service_completed_successfully"}, n
        assert deps["postgres"] == {"condition": "service_healthy"}, n
    assert compose["services"]["airflow-scheduler"]["depends_on"]["kafka-1"] == {
        "condition": "service_healthy"}


def test_the_image_installs_the_wheel_by_the_script_the_install_test_runs() -> None:
    dockerfile = (REPO_ROOT / "docker" / "airflow.Dockerfile").read_text()
    assert "dist/kafka_recon-0.1.0-py3-none-any.whl" in dockerfile
    assert "install.sh python" in dockerfile and "requirements.lock" in dockerfile
    assert " -e " not in dockerfile and "[dev]" not in dockerfile
    assert not re.search(r"^COPY .*\bkafka_recon\s", dockerfile, re.M), "no source tree"
    from kafka_recon import __version__

    assert f"kafka_recon-{__version__}-py3-none-any.whl" in dockerfile


def test_published_ports_do_not_collide(compose: dict[str, Any]) -> None:
    host = [p.split(":")[0] for s in compose["services"].values() for p in s.get("ports", [])]
    assert len(host) == len(set(host)), host
    assert Path(COMPOSE).read_text().count("latest") == 0
