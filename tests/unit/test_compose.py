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


def test_airflow_services_share_the_flow_config_dags_and_connections(compose: dict[str, Any]
                                                                    ) -> None:
    mounts = {n: set(compose["services"][n]["volumes"]) for n in AIRFLOW}
    first = mounts[AIRFLOW[0]]
    assert all(m == first for m in mounts.values())
    for folder in ("config", "dags", "plugins", "spark_jobs", "expectations"):
        assert f"./{folder}:/opt/kafka-recon/{folder}:ro" in first
        assert (REPO_ROOT / folder).is_dir(), folder
    for n in AIRFLOW:
        env = compose["services"][n]["environment"]
        assert env["KAFKA_RECON_CONFIG"] == "/opt/kafka-recon/config/flows.yaml"
        assert "spark://spark-master" in env["AIRFLOW_CONN_SPARK_DEFAULT"]
        assert '"host": "mailpit"' in env["AIRFLOW_CONN_SMTP_DEFAULT"]
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].endswith("@postgres:5432/airflow")
        assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    # executors write id files into the run folder the Airflow side reads
    assert "runs:/opt/kafka-recon/runs" in compose["services"]["spark-worker"]["volumes"]


def test_airflow_waits_for_a_healthy_database_and_the_migration(compose: dict[str, Any]) -> None:
    deps = compose["services"]["airflow-scheduler"]["depends_on"]
    assert deps["postgres"] == {"condition": "service_healthy"}
    assert deps["airflow-init"] == {"condition": "service_completed_successfully"}
    assert deps["kafka-1"] == {"condition": "service_healthy"}


def test_published_ports_do_not_collide(compose: dict[str, Any]) -> None:
    host = [p.split(":")[0] for s in compose["services"].values() for p in s.get("ports", [])]
    assert len(host) == len(set(host)), host
    assert Path(COMPOSE).read_text().count("latest") == 0
