"""Where kafka-recon looks and writes: an environment variable, else Airflow's [kafka_recon]
section, else a default under kafka-recon's home; never inside the installed package."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_recon import settings

pytestmark = pytest.mark.unit

PATH_VARS = ("KAFKA_RECON_HOME", "KAFKA_RECON_CONFIG", "KAFKA_RECON_OUT", "KAFKA_RECON_STORE",
             "KAFKA_RECON_HISTORY", "KAFKA_RECON_LEASE_SECONDS", "KAFKA_RECON_REPLAY_SLOTS",
             "KAFKA_RECON_SNAPSHOTS", "AIRFLOW__KAFKA_RECON__HOME",
             "AIRFLOW__KAFKA_RECON__CONFIG", "AIRFLOW__KAFKA_RECON__RUNS",
             settings.RESOLVED_VAR)


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in PATH_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(settings, "_cli", False)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))


def test_in_airflow_everything_defaults_under_airflow_home_never_the_package(
        tmp_path: Path) -> None:
    home = tmp_path / "airflow" / "kafka-recon"
    assert settings.home() == home
    assert settings.config_path() == home / "flows.yaml"
    assert settings.runs_root() == home / "runs"
    assert settings.snapshots_path() == home / "runs" / "snapshots.db"
    for path in (settings.config_path(), settings.runs_root(), settings.snapshots_path()):
        assert settings.PACKAGE not in path.parents


def test_the_command_line_defaults_under_the_current_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings.use_cli_defaults()
    assert settings.config_path() == tmp_path / "flows.yaml"
    assert settings.runs_root() == tmp_path / "runs"
    assert "the current directory" in settings.config_where()


def test_airflows_kafka_recon_section_is_read_and_the_environment_wins(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__KAFKA_RECON__RUNS", str(tmp_path / "from-airflow"))
    assert settings.runs_root() == tmp_path / "from-airflow"
    monkeypatch.setenv("KAFKA_RECON_OUT", str(tmp_path / "from-env"))
    assert settings.runs_root() == tmp_path / "from-env"
    monkeypatch.setenv("AIRFLOW__KAFKA_RECON__CONFIG", str(tmp_path / "f.yaml"))
    assert "from [kafka_recon] config of Airflow's configuration" in settings.config_where()


def test_a_spark_job_gets_every_path_resolved_and_reads_no_airflow_configuration(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__KAFKA_RECON__RUNS", str(tmp_path / "from-airflow"))
    handed = settings.resolved_paths()
    assert handed["KAFKA_RECON_OUT"] == str(tmp_path / "from-airflow")
    assert handed[settings.RESOLVED_VAR] == "1"
    for var, value in handed.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setenv("AIRFLOW__KAFKA_RECON__STORE", "sqlite:////never/read.db")
    assert settings.store_conn() is None, "a job does not consult Airflow's section"
    assert settings.runs_root() == tmp_path / "from-airflow"


def test_the_shipped_parts_are_read_from_the_package() -> None:
    assert settings.spark_jobs_dir() == settings.PACKAGE / "jobs"
    assert (settings.spark_jobs_dir() / "replay_reconcile.py").is_file()
    assert (settings.expectations_dir() / "great_expectations.yml").is_file()
    assert settings.spark_jars_dir() == settings.PACKAGE / "jars"


def test_every_setting_is_listed_once_and_the_provider_declares_its_airflow_keys() -> None:
    from kafka_recon.airflow.provider import get_provider_info

    names = [s.var for s in settings.SETTINGS]
    assert len(names) == len(set(names))
    keys = {s.key for s in settings.SETTINGS if s.key}
    info = get_provider_info()
    assert set(info["config"]["kafka_recon"]["options"]) == keys
    assert info["plugins"][0]["plugin-class"].endswith("ReconciliationPlugin")


def test_the_store_comes_from_its_setting_or_its_older_name_and_the_lease_from_airflow(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings.store_conn() is None
    monkeypatch.setenv("KAFKA_RECON_HISTORY", "recon_history")
    assert settings.store_conn() == "recon_history"
    monkeypatch.setenv("KAFKA_RECON_STORE", "recon_store")
    assert settings.store_conn() == "recon_store"
    assert settings.lease_seconds() == 300 and settings.replay_slots() == 2
    monkeypatch.setenv("AIRFLOW__KAFKA_RECON__LEASE_SECONDS", "60")
    monkeypatch.setenv("AIRFLOW__KAFKA_RECON__REPLAY_SLOTS", "1")
    assert settings.lease_seconds() == 60 and settings.replay_slots() == 1
    monkeypatch.setenv("KAFKA_RECON_LEASE_SECONDS", "5")
    with pytest.raises(settings.UsageError, match="KAFKA_RECON_LEASE_SECONDS='5': must be at"):
        settings.lease_seconds()
