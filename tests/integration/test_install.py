"""kafka-recon installed as a user installs it: `pip install .` (not editable) into a fresh
virtualenv, run from a folder that is not the repository. What ships must be enough."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.services.kafka import KafkaCluster
from kafka_recon.settings import REPO_ROOT, jars_dir
from tests.integration.engine_harness import END, START, Scenario

pytestmark = pytest.mark.integration

UV = Path(sys.executable).parent / "uv"


def _sh(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=900,
                          **kw)  # type: ignore[call-overload]
    assert done.returncode == 0, (cmd, done.stdout[-2000:], done.stderr[-3000:])
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the lock's dependencies and kafka-recon built from this checkout."""
    venv = tmp_path_factory.mktemp("install") / "venv"
    _sh([str(UV), "venv", "-q", "--python", sys.executable, str(venv)])
    python = venv / "bin" / "python"
    _sh([str(UV), "pip", "sync", "-q", "--python", str(python),
         str(REPO_ROOT / "requirements.lock")])
    _sh([str(UV), "pip", "install", "-q", "--python", str(python), "--no-deps",
         "--reinstall-package", "kafka-recon", str(REPO_ROOT)])
    return venv


def test_the_installed_package_is_the_product_alone(installed: Path, tmp_path: Path) -> None:
    probe = ("import importlib.util as u, json, kafka_recon; print(json.dumps({"
             "'at': kafka_recon.__file__, 'harness': u.find_spec('harness') is not None, "
             "'spark_jobs': u.find_spec('spark_jobs') is not None}))")
    done = _sh([str(installed / "bin" / "python"), "-c", probe], cwd=tmp_path,
               env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)})
    found = json.loads(done.stdout)
    assert "site-packages" in found["at"], found
    assert not found["harness"] and not found["spark_jobs"], found


def test_kafka_recon_run_works_from_a_non_editable_install(
        installed: Path, kafka: KafkaCluster, tmp_path: Path) -> None:
    scn = Scenario(tmp_path, kafka.bootstrap)
    scn.flow_through(20, sink_lacks={5})
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {"PATH": f"{installed / 'bin'}{os.pathsep}{os.environ['PATH']}", "HOME": str(work),
           "JAVA_HOME": os.environ.get("JAVA_HOME", ""), "KAFKA_RECON_JARS": str(jars_dir()),
           "PYSPARK_PYTHON": str(installed / "bin" / "python")}
    done = subprocess.run(
        [str(installed / "bin" / "kafka-recon"), "run", "--config", str(scn.config),
         "--flow", "f", "--start", START.isoformat(), "--end", END.isoformat(),
         "--out", str(work / "out")],
        cwd=work, env={k: v for k, v in env.items() if v}, capture_output=True, text=True,
        timeout=600, check=False)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "1 record(s) lost on the consume side (topic->sink)" in done.stdout
    assert (work / "out" / "missing" / "topic__sink.csv").read_text() == "id\n5\n"
    assert "1 records lost" in (work / "out" / "report.html").read_text(), \
        "the report's templates ship with the package"
