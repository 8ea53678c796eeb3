"""Airflow 3 on a SQLite metadata database, configured for kafka-recon by environment variables.

Connections are `AIRFLOW_CONN_*` variables (Airflow 3 creates no default connections; without
`spark_default` the Spark master would fall back to yarn).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.services.base import Service, ServiceError
from kafka_recon.settings import REPO_ROOT

if TYPE_CHECKING:
    from harness.services.lab import Host

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


# Airflow commands run one after the other in one interpreter: each `airflow` process spends
# seconds importing Airflow (tens of seconds on a loaded machine) before doing anything
_MANY = """
import json, sys
from airflow.configuration import write_default_airflow_configuration_if_needed
from airflow.cli import cli_parser

write_default_airflow_configuration_if_needed()
parser = cli_parser.get_parser()
for args in json.loads(sys.argv[1]):
    print("$ airflow " + " ".join(args), flush=True)
    try:
        parsed = parser.parse_args(args)
        parsed.func(parsed)
    except SystemExit as e:
        if e.code not in (None, 0):
            print(f"airflow {args[0]} {args[1]} failed (exit {e.code})", flush=True)
            raise
"""


def airflow_many(commands: list[list[str]], env: dict[str, str], log: Path,
                 timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """Several `airflow` command lines in one process (stopping at the first that fails), the
    output appended to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as out:
        return subprocess.run([sys.executable, "-c", _MANY, json.dumps(commands)], env=env,
                              stdout=out, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout, check=False)


class AirflowStartError(ServiceError):
    pass


class AirflowServers(Service):
    """Airflow's api-server, scheduler (LocalExecutor), dag-processor and triggerer on loopback.

    Each runs in its own session (setsid) and is stopped by process group: Airflow's components
    fork children that a plain SIGTERM to the parent leaves running. Login is the simple auth
    manager's, with a user and password chosen here and written to its passwords file.
    Four processes writing one SQLite file time out on its lock: give `database_url` (PostgreSQL)
    for anything beyond a look at the UI. DAGs start paused: `unpause` the ones a test runs.
    """

    COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")

    def __init__(self, home: Path, env: dict[str, str], port: int | None = None,
                 user: str = "admin", password: str = "kafka-recon",
                 database_url: str | None = None, setup: list[list[str]] | None = None,
                 host: str = "127.0.0.1", executor: str = "LocalExecutor") -> None:
        """`host`: the api-server's address (a lab's bridge address, for workers on hosts of
        their own); `executor`: the scheduler's (CeleryExecutor: its workers are started
        apart, with `env`)."""
        from harness.services.ports import ensure_free, free_port

        self.home = home.resolve()
        self.port = ensure_free(port, "airflow api-server") if port else free_port()
        self.user, self.password = user, password
        self.url = f"http://{host}:{self.port}"
        self.env = {**env,
                    "AIRFLOW__CORE__EXECUTOR": executor,
                    "AIRFLOW__CORE__PARALLELISM": "4",
                    "AIRFLOW__API__HOST": host,
                    "AIRFLOW__API__PORT": str(self.port),
                    "AIRFLOW__API__BASE_URL": self.url,
                    "AIRFLOW__API__WORKERS": "1",
                    "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
                    # every component must sign and check the same tokens
                    "AIRFLOW__API_AUTH__JWT_SECRET": "kafka-recon-devenv-" + str(self.port),
                    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{user}:admin",
                    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE":
                        str(self.home / "passwords.json"),
                    # every file is parsed once at start, which is all a test needs (none
                    # changes a DAG file afterwards); parsing again every 10 s cost the
                    # dag-processor a sixth of a core, idle, in every Airflow a test started
                    "AIRFLOW__SCHEDULER__DAG_DIR_LIST_INTERVAL": "60",
                    "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "60",
                    "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "120",
                    "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True"}
        if database_url:
            self.env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = re.sub(
                r"^postgres(ql)?://", "postgresql+psycopg2://", database_url)
        # airflow commands run once the database is migrated, before the servers start (an
        # auth manager's users and roles)
        self.setup = setup or []
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, timeout: float = 240) -> AirflowServers:
        import time

        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "passwords.json").write_text(json.dumps({self.user: self.password}))
        log = self.home / "migrate.log"
        done = airflow_many([["db", "migrate"], *self.setup], self.env, log, timeout=900)
        if done.returncode != 0:
            raise AirflowStartError(f"airflow db migrate or a setup command failed (exit "
                                    f"{done.returncode}); see {log}")
        for name in self.COMPONENTS:
            self._spawn(name)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dead = {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}
            if dead:
                self.stop()
                raise AirflowStartError(f"airflow {dead} exited while starting; see the logs in "
                                        f"{self.home}")
            try:
                self.token()
                return self
            except OSError:
                time.sleep(1)
        self.stop()
        raise AirflowStartError(f"airflow api-server did not answer on {self.url} within "
                                f"{timeout:.0f}s; see {self.home / 'api-server.log'}")

    def _spawn(self, name: str) -> None:
        out = (self.home / f"{name}.log").open("ab")
        self.procs[name] = subprocess.Popen([str(VENV_BIN / "airflow"), name], env=self.env,
                                            stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def kill(self, *names: str) -> None:
        """Components gone at once (SIGKILL to each one's process group, its children too), as
        on a host that died; `revive` starts them again."""
        import signal

        for name in names:
            p = self.procs[name]
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(30)

    def revive(self, *names: str) -> None:
        for name in names:
            self._spawn(name)

    def token(self, user: str | None = None, password: str | None = None) -> str:
        """A JWT from the auth manager's login (`user`, default the admin), as a program gets
        one."""
        import urllib.request

        req = urllib.request.Request(
            f"{self.url}/auth/token", method="POST",
            data=json.dumps({"username": user or self.user,
                             "password": password or self.password}).encode(),
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return str(json.loads(resp.read())["access_token"])

    def _admin_token(self) -> str:
        """The admin's token, fetched once: a poll every second that logs in each time loads
        the api-server with a password check per call, and on a busy CI machine the login
        itself then timed out (tokens last a day, far beyond any test)."""
        cached: str | None = getattr(self, "_token", None)
        if cached is None:
            cached = self._token = self.token()
        return cached

    def api(self, method: str, path: str, body: Any = None, token: str | None = None
            ) -> tuple[int, Any]:
        """One REST API v2 call; returns the status and the decoded JSON (errors included).
        A GET that times out or loses its connection is asked again (twice): it changes
        nothing, and a poll must not fail a test because the api-server was slow once."""
        import time
        import urllib.error
        import urllib.request

        attempts = 3 if method == "GET" else 1
        for attempt in range(attempts):
            req = urllib.request.Request(
                f"{self.url}/api/v2{path}", method=method,
                data=None if body is None else json.dumps(body).encode(),
                headers={"Content-Type": "application/json",
                         "Authorization": f"Bearer {token or self._admin_token()}"})
            try:
                with urllib.request.urlopen(req, timeout=30) as resp:
                    return resp.status, json.loads(resp.read() or b"null")
            except urllib.error.HTTPError as exc:
                raw = exc.read()
                try:
                    return exc.code, json.loads(raw)
                except ValueError:
                    return exc.code, raw.decode(errors="replace")
            except OSError:  # a timeout, a refused or reset connection: not an answer
                if attempt == attempts - 1:
                    raise
                time.sleep(2)
        raise AssertionError("unreachable")

    def parked(self, dag_id: str, run_id: str, task_id: str, timeout: float = 120) -> None:
        """Wait until a task parked for a person's answer (human-in-the-loop) has had its
        process's exit reported to the scheduler. An answer before that lets the answer queue
        the task again first, and Airflow 3.3's scheduler then fails it ("finished with state
        success, but the task instance's state attribute is queued"); the exit was seen to
        come up to 6 s after the task parked on a loaded machine. A person is never that
        quick; a program answering through the REST API must wait for it."""
        import time

        line = ("Received executor event with state success for task instance "
                f"TaskInstanceKey(dag_id='{dag_id}', task_id='{task_id}', run_id='{run_id}'")
        log = self.home / "scheduler.log"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if log.exists() and line in log.read_text(errors="replace"):
                return
            time.sleep(0.5)
        raise AssertionError(f"{dag_id}.{task_id} {run_id}: the scheduler never heard that "
                             f"the parked task's process ended (see {log})")

    def unpause(self, dag_id: str, timeout: float = 180) -> None:
        """Wait until the dag-processor has parsed `dag_id`, then unpause it."""
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code, body = self.api("PATCH", f"/dags/{dag_id}", {"is_paused": False})
            if code == 200:
                return
            time.sleep(2)
        raise AirflowStartError(f"{dag_id} was not parsed within {timeout:.0f}s ({body}); see "
                                f"{self.home / 'dag-processor.log'}")

    def stop(self) -> None:
        import signal
        import time

        for p in self.procs.values():
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for p in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(max(0.1, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)  # whatever is left of the group
        self.procs.clear()


def celery_worker(host: Host, env: dict[str, str], deploy: Path, log: Path
                  ) -> subprocess.Popen[bytes]:
    """A Celery worker (concurrency 1) on a lab host: what a deployment ships (`deploy`: the
    DAG folder `dags/` and the flow config `flows.yaml`) copied into its private /tmp, its
    Airflow home there too, its name and the address the api-server reads its logs from its
    own."""
    home = Path("/tmp/airflow")
    return host.spawn(
        [str(VENV_BIN / "airflow"), "celery", "worker", "--concurrency", "1",
         "--celery-hostname", f"{host.name}@{host.name}"],
        {**env, "AIRFLOW_HOME": str(home), "KAFKA_RECON_HOME": "/tmp/recon",
         "AIRFLOW__CORE__DAGS_FOLDER": "/tmp/deploy/dags",
         "KAFKA_RECON_CONFIG": "/tmp/deploy/flows.yaml",
         "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
         # the api-server fetches a task's log from this worker by its address
         "AIRFLOW__CORE__HOSTNAME_CALLABLE": "harness.services.lab.address",
         "LAB_HOST_ADDRESS": host.address,
         # the Spark driver (client mode) listens where the executors can reach it
         "SPARK_LOCAL_IP": host.address},
        log, setup=f"mkdir -p /tmp/deploy /tmp/recon && cp -r {deploy}/. /tmp/deploy/")


def worker_ready(log: Path) -> bool:
    """A Celery worker logs `<its name> ready.` once it consumes its queue."""
    return log.is_file() and " ready." in log.read_text(errors="replace")


def ship(deploy: Path, config: str) -> Path:
    """What a deployment ships to every host, into `deploy`: the DAG folder and the flow
    config (`config`, its YAML)."""
    import shutil

    shutil.copytree(REPO_ROOT / "dags", deploy / "dags",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (deploy / "flows.yaml").write_text(config)
    return deploy


def celery_env(home: Path, deploy: Path, *, at: str, smtp_port: int, redis_url: str,
               metadata_url: str, store_url: str, s3_connection: str, runs: str,
               spark_master: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Airflow's environment for a deployment on many hosts: the CeleryExecutor (Redis, its
    results in the metadata database), one task at a time per worker, the shipped `deploy`
    folder, run folders at `runs` (an `s3://recon_s3@bucket/prefix` through the S3 server's
    connection), kafka-recon's store at `store_url`, Spark on a standalone master, mail to the
    server at `at`."""
    return airflow_env(home, smtp_port=smtp_port, extra={
        "KAFKA_RECON_CONFIG": str(deploy / "flows.yaml"),
        "KAFKA_RECON_OUT": runs,
        "AIRFLOW_CONN_RECON_S3": s3_connection,
        "KAFKA_RECON_STORE": store_url,
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": spark_master}),
        "AIRFLOW_CONN_SMTP_DEFAULT": json.dumps({
            "conn_type": "smtp", "host": at, "port": smtp_port,
            "extra": {"disable_ssl": True, "disable_tls": True, "retry_limit": 1,
                      "from_email": "kafka-recon@localhost", "timeout": 10}}),
        "AIRFLOW__CELERY__BROKER_URL": redis_url,
        "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + metadata_url.replace(
            "postgresql://", "postgresql+psycopg2://"),
        "AIRFLOW__CELERY__WORKER_CONCURRENCY": "1",
        # the api-server reads task logs from the workers' log servers with it
        "AIRFLOW__API__SECRET_KEY": "kafka-recon-" + home.name,
        "AIRFLOW__CORE__DAGS_FOLDER": str(deploy / "dags"),
        **(extra or {})})
