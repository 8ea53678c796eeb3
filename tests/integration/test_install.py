"""kafka-recon installed as a platform team installs it: the wheel (`python -m build`) into a
fresh virtualenv beside an Airflow, by the same script the container image runs
(docker/install.sh), then used from folders that are not the repository. What ships must be
enough: a one-line DAG file, the plugin and provider found through entry points, the Spark jobs,
suites, templates and jars inside the package, every path from the settings.

Two Airflows: the lock's (3.3) and another minor (3.2), each under the lock's versions of
everything else: each end of `apache-airflow>=3.2,<3.4` is backed by a run here."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.services.kafka import KafkaCluster
from harness.services.smtp import MailCatcher
from kafka_recon.settings import REPO_ROOT
from tests.integration.engine_harness import END, START, Scenario

pytestmark = pytest.mark.integration

TOOLS = Path(sys.executable).parent  # uv, for docker/install.sh
N = 30

LOCK = REPO_ROOT / "requirements.lock"
LOCKED_AIRFLOW = re.findall(r"^apache-airflow==\S+", LOCK.read_text(), re.M)[0]

# The Airflow requirement, the lock's pins its constraints leave out, and pins of their own. The
# lock's Airflow takes the whole lock. Another minor takes the lock but for Airflow's own packages
# and what that Airflow holds otherwise, plus what its constraint file pins and its requirements do
# not: Airflow 3.2.2 needs aiosqlite<0.22 and breaks on svcs 26 and fastapi 0.137+ (its
# in-process execution API fails: "'State' object has no attribute 'svcs_registry'"). A
# deployment installs Airflow under its constraint file; these stand in for it offline.
AIRFLOWS = {
    "lock": (LOCKED_AIRFLOW, (), ""),
    "airflow-3.2": ("apache-airflow>=3.2,<3.3",
                    ("apache-airflow==", "apache-airflow-core==", "apache-airflow-task-sdk==",
                     "aiosqlite==", "svcs=="),
                    "svcs<26\n"),
}


def constraints(kind: str, folder: Path) -> Path:
    _, left_out, own = AIRFLOWS[kind]
    pins = [line for line in LOCK.read_text().splitlines()
            if line and not line.startswith((" ", "#")) and not line.startswith(left_out)]
    path = folder / "constraints.txt"
    path.write_text("\n".join(pins) + "\n" + own)
    return path


def _sh(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=900,
                          **kw)  # type: ignore[call-overload]
    assert done.returncode == 0, (cmd, done.stdout[-3000:], done.stderr[-3000:])
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _sh([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(REPO_ROOT)])
    # the build leaves kafka_recon.egg-info in the checkout, as `make wheel` removes it: there
    # it would put the plugin's entry point on sys.path twice for every later Airflow
    shutil.rmtree(REPO_ROOT / "kafka_recon.egg-info", ignore_errors=True)
    [built] = out.glob("kafka_recon-*.whl")
    return built


@dataclass
class Install:
    kind: str
    venv: Path
    work: Path

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    def env(self, **extra: str) -> dict[str, str]:
        """A clean environment: this venv's commands, nothing of the checkout's."""
        env = {"PATH": f"{self.bin}{os.pathsep}/usr/bin:/bin", "HOME": str(self.work),
               "JAVA_HOME": os.environ.get("JAVA_HOME", ""), "LANG": "C.UTF-8",
               "GX_ANALYTICS_ENABLED": "false", "NO_PROXY": "*"}
        return {k: v for k, v in {**env, **extra}.items() if v}


@pytest.fixture(scope="module", params=sorted(AIRFLOWS))
def installed(request: pytest.FixtureRequest, wheel: Path,
              tmp_path_factory: pytest.TempPathFactory) -> Install:
    airflow = AIRFLOWS[request.param][0]
    root = tmp_path_factory.mktemp(f"install-{request.param}")
    venv, work = root / "venv", root / "work"
    work.mkdir()
    _sh([str(TOOLS / "uv"), "venv", "-q", "--python", sys.executable, str(venv)])
    _sh(["sh", str(REPO_ROOT / "docker" / "install.sh"), str(venv / "bin" / "python"),
         str(wheel), airflow, str(constraints(request.param, root))],
        env={**os.environ, "PATH": f"{TOOLS}{os.pathsep}{os.environ['PATH']}"})
    # each install leaves uv's cache a new pyspark build (1.3 GB) when the registry's answers
    # must be revalidated; the superseded ones are unreachable: 60 GB of them filled CI's disk
    _sh([str(TOOLS / "uv"), "cache", "prune", "-q"])
    return Install(request.param, venv, work)


def test_the_installed_package_is_the_product_alone(installed: Install) -> None:
    probe = ("import importlib.util as u, json, kafka_recon, airflow; "
             "from kafka_recon.settings import spark_jars, spark_jobs_dir, expectations_dir; "
             "print(json.dumps({'at': kafka_recon.__file__, 'airflow': airflow.__version__, "
             "'harness': u.find_spec('harness') is not None, "
             "'spark_jobs': u.find_spec('spark_jobs') is not None, 'jars': spark_jars(), "
             "'jobs': str(spark_jobs_dir()), 'gx': str(expectations_dir())}))")
    found = json.loads(_sh([str(installed.bin / "python"), "-c", probe], cwd=installed.work,
                           env=installed.env()).stdout)
    site = str(installed.venv)
    assert found["at"].startswith(site) and "site-packages" in found["at"], found
    assert not found["harness"] and not found["spark_jobs"], found
    assert found["airflow"].startswith("3.3." if installed.kind == "lock" else "3.2."), found
    names = {Path(j).name for j in found["jars"]}
    assert {"kafka-recon-reader.jar", "kafka-clients-3.9.0.jar",
            "spark-avro_2.13-4.0.0.jar"} <= names, names
    assert all(j.startswith(site) for j in found["jars"]), "the jars ship in the wheel"
    assert (Path(found["jobs"]) / "replay_reconcile.py").is_file()
    assert (Path(found["gx"]) / "great_expectations.yml").is_file()


def test_a_one_line_dag_file_runs_a_flow_with_the_exact_result_where_the_settings_say(
        installed: Install, kafka: KafkaCluster) -> None:
    work = installed.work / "dagtest"
    work.mkdir()
    scn = Scenario(work, kafka.bootstrap)
    scn.flow_through(N, every=10)
    home, dags, runs = work / "airflow", work / "dags", work / "elsewhere" / "runs"
    dags.mkdir(parents=True)
    # the DAG file a user writes, in an otherwise empty DAG folder
    (dags / "kafka_recon_dags.py").write_text(
        "# Airflow DAGs of kafka-recon\nfrom kafka_recon.dags import flow_dags\n"
        "globals().update(flow_dags())\n")
    # the flow config where kafka-recon looks by default, $AIRFLOW_HOME/kafka-recon/flows.yaml;
    # the runs where Airflow's own configuration says, its [kafka_recon] section
    (home / "kafka-recon").mkdir(parents=True)
    (home / "kafka-recon" / "flows.yaml").write_text(scn.config.read_text())
    mail = MailCatcher(work / "mail").start()
    try:
        env = installed.env(
            AIRFLOW_HOME=str(home), AIRFLOW__CORE__DAGS_FOLDER=str(dags),
            AIRFLOW__CORE__LOAD_EXAMPLES="False", AIRFLOW__CORE__UNIT_TEST_MODE="False",
            AIRFLOW__KAFKA_RECON__RUNS=str(runs),
            AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": "local[*]"}),
            AIRFLOW_CONN_SMTP_DEFAULT=json.dumps({
                "conn_type": "smtp", "host": "127.0.0.1", "port": mail.port,
                "extra": {"disable_ssl": True, "disable_tls": True, "retry_limit": 1,
                          "from_email": "kafka-recon@localhost", "timeout": 10}}))
        log = work / "airflow.log"

        def airflow(*args: str) -> subprocess.CompletedProcess[str]:
            done = subprocess.run([str(installed.bin / "airflow"), *args], cwd=work, env=env,
                                  capture_output=True, text=True, timeout=900, check=False)
            with log.open("a") as out:
                out.write(f"$ airflow {' '.join(args)}\n{done.stdout}\n{done.stderr}\n")
            return done

        assert airflow("db", "migrate").returncode == 0, log
        plugins = airflow("plugins", "--output", "json")
        assert any(p["name"] == "kafka_recon" for p in json.loads(plugins.stdout)), log
        providers = airflow("providers", "list", "--output", "json")
        assert any(p["package_name"] == "kafka-recon"
                   for p in json.loads(providers.stdout)), log
        dag = airflow("dags", "test", "recon__f", END.isoformat())
        assert dag.returncode == 0, log
    finally:
        mail.stop()
    window = f"{START:%Y-%m-%dT%H%M%SZ}_{END:%Y-%m-%dT%H%M%SZ}"
    result = json.loads((runs / "f" / window / "result.json").read_text())
    assert result["status"] == "ok", result["reasons"]
    assert [(t["name"], t["count"]) for t in result["tiers"]] == [
        ("db", N), ("topic", N), ("sink", N)]
    assert not list(installed.venv.rglob("result.json")), "nothing is written in the package"

    # the same flow checked from a shell, the config named by Airflow's [kafka_recon] section
    checked = subprocess.run(
        [str(installed.bin / "kafka-recon"), "check", "--flow", "f",
         "--start", START.isoformat(), "--end", END.isoformat()],
        cwd=work, capture_output=True, text=True, timeout=300, check=False,
        env={**env, "AIRFLOW__KAFKA_RECON__CONFIG": str(home / "kafka-recon" / "flows.yaml")})
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"db: sqlite file {scn.up}: {N} row(s) in the window" in checked.stdout
    assert f"{N} record(s) in the window" in checked.stdout
