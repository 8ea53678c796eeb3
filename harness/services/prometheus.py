"""A Prometheus server on loopback (Debian's `prometheus` package) scraping given targets.

It scrapes every second and evaluates rules every second, so a test sees a metric or an alert
within seconds; `query` and `alerts` read its HTTP API as Grafana or Alertmanager would.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Self

from harness.services.base import Service, ServiceError, terminate
from harness.services.ports import HOST, free_port, is_open


class Prometheus(Service):
    def __init__(self, folder: Path, targets: list[dict[str, Any]],
                 rule_files: list[Path] | None = None) -> None:
        """`targets`: scrape jobs, each {job, address, path, token (optional)}."""
        self.folder = folder.resolve()
        self.port = free_port()
        self.targets, self.rule_files = targets, rule_files or []
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def _config(self) -> str:
        jobs = []
        for t in self.targets:
            job: dict[str, Any] = {"job_name": t["job"], "metrics_path": t["path"],
                                   "static_configs": [{"targets": [t["address"]]}]}
            if t.get("token"):
                secret = self.folder / f"{t['job']}.token"
                secret.write_text(t["token"])
                job["authorization"] = {"type": "Bearer", "credentials_file": str(secret)}
            jobs.append(job)
        # JSON is YAML: no YAML writer needed
        return json.dumps({"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                           "rule_files": [str(p.resolve()) for p in self.rule_files],
                           "scrape_configs": jobs}, indent=2)

    def start(self, timeout: float = 60) -> Self:
        binary = shutil.which("prometheus")
        if binary is None:
            raise ServiceError("prometheus not found: apt-get install prometheus "
                               "(Debian's package; `make test` installs it)")
        self.folder.mkdir(parents=True, exist_ok=True)
        config = self.folder / "prometheus.yml"
        config.write_text(self._config())
        log = (self.folder / "prometheus.log").open("ab")
        self.proc = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={self.folder / 'data'}",
             f"--web.listen-address={HOST}:{self.port}"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        # the port opens before the TSDB is loaded; until then the API answers 503
        deadline = time.monotonic() + timeout
        while not (is_open(self.port) and self._ready()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = (self.folder / "prometheus.log").read_text(errors="replace")[-600:]
                raise ServiceError(f"prometheus did not get ready on {HOST}:{self.port}: {tail}")
            time.sleep(0.2)
        return self

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=5) as r:
                return bool(r.status == 200)
        except OSError:  # URLError and HTTPError (503 while starting) are OSErrors
            return False

    def stop(self) -> None:
        if self.proc is not None:
            terminate(self.proc.pid)
            self.proc = None

    def api(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10) as r:
            body = json.loads(r.read())
        if body.get("status") != "success":
            raise ServiceError(f"prometheus {path}: {body}")
        return body["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant query's samples: [{metric: labels, value: float}]."""
        return [{"metric": r["metric"], "value": float(r["value"][1])}
                for r in self.api("query", query=promql)["result"]]

    def alerts(self) -> list[dict[str, Any]]:
        return list(self.api("alerts")["alerts"])

    def targets_health(self) -> dict[str, str]:
        """Each scrape job's health (up, down, unknown) and its last error, if any."""
        return {t["labels"]["job"]: t["health"] + (f": {t['lastError']}" if t["lastError"]
                                                     else "")
                for t in self.api("targets")["activeTargets"]}
