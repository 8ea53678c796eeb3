"""`airflow_many`: several Airflow command lines in one process, stopping at the first that
fails, so that a test's Airflow setup pays Airflow's import once."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.services.airflow import airflow_env, airflow_many

pytestmark = pytest.mark.unit


def test_commands_run_in_order_and_the_first_failure_stops_them(tmp_path: Path) -> None:
    env = airflow_env(tmp_path / "home", smtp_port=2525)
    log = tmp_path / "setup.log"
    done = airflow_many([["config", "get-value", "core", "load_examples"],
                         ["dags", "no-such-command"],
                         ["config", "get-value", "core", "dags_are_paused_at_creation"]],
                        env, log)
    assert done.returncode != 0
    text = log.read_text()
    assert "$ airflow config get-value core load_examples" in text and "False" in text
    assert "airflow dags no-such-command failed (exit 2)" in text
    assert "dags_are_paused_at_creation" not in text  # never ran


def test_every_command_that_succeeds_gives_exit_code_zero(tmp_path: Path) -> None:
    env = airflow_env(tmp_path / "home", smtp_port=2525)
    done = airflow_many([["config", "get-value", "core", "load_examples"]] * 2, env,
                        tmp_path / "setup.log")
    assert done.returncode == 0
    assert (tmp_path / "setup.log").read_text().count("$ airflow config") == 2
