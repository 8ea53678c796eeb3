"""A Spark standalone cluster (one master, one worker) started from the PySpark install.

PySpark ships Spark's jars and `bin/spark-class`, which is all a standalone master and worker
need: no separate Spark download. Both run in their own sessions and are stopped by process group.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.services.base import Service
from harness.services.ports import HOST, free_port, wait_open

if TYPE_CHECKING:
    from harness.services.lab import Host


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


class SparkStandalone(Service):
    def __init__(self, base: Path, cores: int = 2, memory: str = "2g", host: str = HOST,
                 worker_host: Host | None = None) -> None:
        """`host`: the master's address; `worker_host`: a lab host (harness.services.lab) the
        worker runs on, in its own namespaces, its working folder in that host's private
        /tmp (default: this host, beside the master)."""
        self.base = base.resolve()
        self.port, self.ui_port, self.worker_ui = free_port(), free_port(), free_port()
        self.cores, self.memory = cores, memory
        self.host, self.worker_host = host, worker_host
        self.master = f"spark://{host}:{self.port}"
        self.procs: list[subprocess.Popen[bytes]] = []

    def _env(self, local_ip: str, work_dir: Path) -> dict[str, str]:
        return {**os.environ, "SPARK_HOME": str(spark_home()),
                "SPARK_LOG_DIR": str(self.base / "logs"), "SPARK_LOCAL_IP": local_ip,
                "SPARK_WORKER_DIR": str(work_dir),
                "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}

    @property
    def work_dir(self) -> Path:
        return Path("/tmp/spark-work") if self.worker_host else self.base / "work"

    def _spawn(self, name: str, args: list[str], on: Host | None = None) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        log = self.base / f"{name}.log"
        cmd = [str(spark_home() / "bin" / "spark-class"), *args]
        if on is not None:
            env = self._env(on.address, self.work_dir)
            self.procs.append(on.spawn(cmd, env, log, setup=f"mkdir -p {self.work_dir}"))
            return
        self.procs.append(subprocess.Popen(cmd, env=self._env(self.host, self.work_dir),
                                           stdout=log.open("ab"), stderr=subprocess.STDOUT,
                                           start_new_session=True))

    def start(self, timeout: float = 90) -> SparkStandalone:
        if self.worker_host is None:
            self.work_dir.mkdir(parents=True, exist_ok=True)
        self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", self.host,
                               "--port", str(self.port), "--webui-port", str(self.ui_port)])
        wait_open(self.port, timeout, "spark master", self.host)
        worker = self.worker_host.address if self.worker_host else self.host
        self._spawn("worker", ["org.apache.spark.deploy.worker.Worker", self.master,
                               "--host", worker, "--cores", str(self.cores), "--memory",
                               self.memory, "--webui-port", str(self.worker_ui),
                               "--work-dir", str(self.work_dir)], self.worker_host)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.state().get("aliveworkers", 0) >= 1:
                return self
            time.sleep(1)
        self.stop()
        raise TimeoutError(f"no Spark worker registered with {self.master} in {timeout:.0f}s; "
                           f"see {self.base}/worker.log")

    def state(self) -> dict[str, Any]:
        """The master's own view (its web UI's JSON): workers, running and completed apps."""
        try:
            with urllib.request.urlopen(f"http://{self.host}:{self.ui_port}/json/",
                                        timeout=5) as r:
                return dict(json.loads(r.read()))
        except OSError:
            return {}

    def stop(self) -> None:
        for p in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(20)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
        self.procs.clear()


class SparkConnect(Service):
    """A Spark Connect server as `kafka-recon spark-server` starts it (or `argv`, a command
    line of the caller's, for a server set up otherwise); runs reach it at `url`."""

    def __init__(self, base: Path, master: str = "local[2]",
                 argv: list[str] | None = None) -> None:
        self.base = base.resolve()
        self.port = free_port()
        self.url = f"sc://{HOST}:{self.port}"
        self.master = master
        self.argv = argv
        self.proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        if self.argv is not None:
            return [*self.argv, "--conf", f"spark.connect.grpc.binding.port={self.port}",
                    "spark-internal"]
        return [sys.executable, "-m", "kafka_recon", "spark-server", "--master", self.master,
                "--host", HOST, "--port", str(self.port)]

    @property
    def log(self) -> Path:
        return self.base / "spark-connect.log"

    def start(self, timeout: float = 120) -> SparkConnect:
        self.base.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                env={**os.environ, "PYSPARK_PYTHON": sys.executable})
        try:
            wait_open(self.port, timeout, f"Spark Connect server (log: {self.log})")
        except TimeoutError:
            self.stop()
            raise
        return self

    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc = None
