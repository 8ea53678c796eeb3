"""A private MariaDB server (Debian's `mariadb-server`) on one address, for MySQL-family tiers.

Its own data folder, socket and port; a user `recon` with the given password that may connect
from anywhere (root keeps its socket-only login). As root the server runs as root (`--user=root`):
the folder stays private to the test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Self

from harness.services.base import Service, ServiceError, terminate
from harness.services.ports import HOST, free_port, is_open

USER = "recon"


def _binary(name: str) -> str:
    found = shutil.which(name) or (f"/usr/sbin/{name}" if Path(f"/usr/sbin/{name}").exists()
                                   else None)
    if found is None:
        raise ServiceError(f"{name} not found: apt-get install mariadb-server (Debian's "
                           "package; `make test` installs it)")
    return found


class MariaDBServer(Service):
    def __init__(self, folder: Path, host: str = HOST, password: str = "recon-pw") -> None:
        self.folder, self.host, self.port = folder.resolve(), host, free_port()
        self.password = password
        self.data, self.socket = self.folder / "data", self.folder / "mariadb.sock"
        self.proc: subprocess.Popen[bytes] | None = None

    def _user(self) -> list[str]:
        return ["--user=root"] if os.geteuid() == 0 else []

    def start(self, timeout: float = 60) -> Self:
        self.folder.mkdir(parents=True, exist_ok=True)
        if not (self.data / "mysql").exists():
            done = subprocess.run(
                [_binary("mariadb-install-db"), "--no-defaults", f"--datadir={self.data}",
                 "--auth-root-authentication-method=socket", "--skip-test-db", *self._user()],
                capture_output=True, text=True, check=False, timeout=300)
            if done.returncode != 0:
                raise ServiceError(f"mariadb-install-db failed: {done.stderr[-600:]}")
        log = self.folder / "mariadb.log"
        self.proc = subprocess.Popen(
            [_binary("mariadbd"), "--no-defaults", f"--datadir={self.data}",
             f"--socket={self.socket}", f"--port={self.port}", f"--bind-address={self.host}",
             f"--pid-file={self.folder / 'mariadb.pid'}", f"--log-error={log}",
             "--skip-name-resolve", "--innodb-buffer-pool-size=32M", "--skip-log-bin",
             "--innodb-flush-log-at-trx-commit=0", *self._user()],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not (is_open(self.port, self.host) and self.socket.exists()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = log.read_text(errors="replace")[-600:] if log.exists() else ""
                raise ServiceError(f"mariadb did not start on {self.host}:{self.port}: {tail}")
            time.sleep(0.2)
        self.sql(f"CREATE USER IF NOT EXISTS '{USER}'@'%' IDENTIFIED BY '{self.password}'; "
                 f"GRANT ALL ON *.* TO '{USER}'@'%'")
        return self

    def sql(self, statements: str, database: str = "") -> str:
        """Statements run as root through the socket; their output (tab-separated)."""
        done = subprocess.run(
            [_binary("mariadb"), "--no-defaults", f"--socket={self.socket}", "-uroot", "-N",
             "-B", "-e", statements, *([database] if database else [])],
            capture_output=True, text=True, check=False, timeout=60)
        if done.returncode != 0:
            raise ServiceError(f"mariadb: {done.stderr.strip()}")
        return done.stdout

    def create_database(self, name: str) -> str:
        self.sql(f"CREATE DATABASE `{name}`")
        return self.url(name)

    def url(self, database: str) -> str:
        return f"mysql+pymysql://{USER}:{self.password}@{self.host}:{self.port}/{database}"

    def stop(self) -> None:
        if self.proc is not None:
            terminate(self.proc.pid)
            self.proc = None
