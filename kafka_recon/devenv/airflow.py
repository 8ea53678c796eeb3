"""Airflow 3 on a SQLite metadata database, configured for kafka-recon by environment variables.

Connections are `AIRFLOW_CONN_*` variables (Airflow 3 creates no default connections; without
`spark_default` the Spark master would fall back to yarn).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kafka_recon.paths import REPO_ROOT

VENV_BIN = Path(sys.executable).parent


def airflow_env(home: Path, *, smtp_port: int, extra: dict[str, str] | None = None,
                spark_master: str = "local[*]") -> dict[str, str]:
    home = home.resolve()
    env = dict(os.environ)
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO_ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO_ROOT / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": spark_master}),
        "AIRFLOW_CONN_SMTP_DEFAULT": json.dumps({
            "conn_type": "smtp", "host": "127.0.0.1", "port": smtp_port,
            "extra": {"disable_ssl": True, "disable_tls": True, "retry_limit": 1,
                      "from_email": "kafka-recon@localhost", "timeout": 10}}),
        "PATH": f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "GX_ANALYTICS_ENABLED": "false",
        "NO_PROXY": "*",
    })
    env.update(extra or {})
    return env


def airflow(args: list[str], env: dict[str, str], log: Path,
            timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """Run the `airflow` command line of this venv, its output appended to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as out:
        out.write(f"\n$ airflow {' '.join(args)}\n")
        out.flush()
        return subprocess.run([str(VENV_BIN / "airflow"), *args], env=env, stdout=out,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout, check=False)
