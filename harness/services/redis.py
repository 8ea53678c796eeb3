"""Redis (Debian's `redis-server`) on one address: the Celery broker of the two-host test."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Self

from harness.services.base import Service, ServiceError, terminate
from harness.services.ports import HOST, free_port, is_open


class RedisServer(Service):
    def __init__(self, folder: Path, host: str = HOST) -> None:
        self.folder, self.host, self.port = folder.resolve(), host, free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def start(self, timeout: float = 30) -> Self:
        binary = shutil.which("redis-server")
        if binary is None:
            raise ServiceError("redis-server not found: apt-get install redis-server "
                               "(Debian's package; `make test` installs it)")
        self.folder.mkdir(parents=True, exist_ok=True)
        log = (self.folder / "redis.log").open("ab")
        # nothing kept on disk: a broker's queue for one test
        self.proc = subprocess.Popen(
            [binary, "--bind", self.host, "--port", str(self.port), "--save", "",
             "--appendonly", "no", "--dir", str(self.folder), "--protected-mode", "no"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not is_open(self.port, self.host):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = (self.folder / "redis.log").read_text(errors="replace")[-400:]
                raise ServiceError(f"redis did not start on {self.host}:{self.port}: {tail}")
            time.sleep(0.1)
        return self

    def stop(self) -> None:
        if self.proc is not None:
            terminate(self.proc.pid)
            self.proc = None
