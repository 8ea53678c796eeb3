"""`bench.cpu_census`: a process's kind from its command line, and the census of a command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cpu_census import kind

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("cmdline", "expected"), [
    ("/usr/bin/java -Xmx1g -cp /x/libs/* kafka.Kafka /x/server.properties", "kafka broker"),
    ("java -cp a org.apache.spark.deploy.SparkSubmit --master local[2] job.py",
     "spark driver (JVM)"),
    ("/r/.venv/bin/python /r/.venv/bin/airflow dag-processor", "airflow dag-processor"),
    ("/r/.venv/bin/python -m pytest -m integration -n 2", "pytest"),
    ("/usr/lib/postgresql/15/bin/postgres -D /tmp/pg", "postgres"),
    ("/usr/bin/make test", "make"),
])
def test_a_process_is_named_by_the_first_kind_its_command_line_matches(
        cmdline: str, expected: str) -> None:
    assert kind(cmdline) == expected


def test_a_census_counts_the_cpu_a_command_spends_and_returns_its_exit_code(
        tmp_path: Path) -> None:
    out = tmp_path / "census.json"
    busy = "import time\nt=time.process_time()\nwhile time.process_time()-t<1.5: pass\n" \
           "time.sleep(0.6)\nraise SystemExit(3)"
    # in a process of its own: a census makes itself the reaper of orphans, which a pytest
    # worker must not become
    done = subprocess.run([sys.executable, "-m", "bench.cpu_census", "--out", str(out),
                           "--every", "0.2", "--", sys.executable, "-c", busy], check=False)
    assert done.returncode == 3
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == 1 and doc["exit_code"] == 3
    python = {k["kind"]: k["cpu_s"] for k in doc["kinds"]}["python (other)"]
    assert 1.2 <= python <= 3.0
