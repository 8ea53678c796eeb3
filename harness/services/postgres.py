"""A private PostgreSQL server on loopback, from Debian's package (initdb + pg_ctl).

PostgreSQL refuses to run as root, so as root the server runs as the `postgres` system user
(created by the Debian package) in a folder it owns. Trust authentication on 127.0.0.1 only.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

from harness.services.base import Service, ServiceError
from harness.services.ports import HOST, ensure_free, free_port, wait_open


class PostgresNotFoundError(ServiceError):
    pass


def pg_bin(tool: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{tool}"))
    if found:
        return found[-1]
    on_path = shutil.which(tool)
    if on_path:
        return on_path
    raise PostgresNotFoundError(
        f"{tool} not found: install PostgreSQL (Debian: apt-get install postgresql)")


class PostgresServer(Service):
    def __init__(self, base_dir: Path | str, port: int | None = None, host: str = HOST,
                 tls: bool = False, logical: bool = False) -> None:
        """`host`: the address it listens on (loopback; a lab's bridge address, whose /24 is
        then trusted too, for hosts in network namespaces: harness.services.lab). `logical`:
        `wal_level=logical`, for a change data capture (Debezium's pgoutput). `tls`: a
        self-signed certificate (`ca` is its file), and every TCP connection without TLS
        refused, so a client that does not ask for TLS fails."""
        self.host, self.tls, self.logical = host, tls, logical
        self.base_dir = Path(base_dir).resolve()
        self.data = self.base_dir / "data"
        self.port = ensure_free(port, "postgresql") if port else free_port()
        self.user = "postgres"

    def _as_owner(self, cmd: list[str]) -> list[str]:
        if os.geteuid() == 0:
            return ["runuser", "-u", "postgres", "--", *cmd]
        return cmd

    def _run(self, cmd: list[str]) -> None:
        proc = subprocess.run(self._as_owner(cmd), capture_output=True, text=True, check=False,
                              timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:2])} failed ({proc.returncode}): "
                               f"{proc.stderr.strip() or proc.stdout.strip()}")

    def start(self) -> PostgresServer:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.base_dir, "postgres", "postgres")
            closed = [p for p in self.base_dir.parents if p.stat().st_mode & 0o001 == 0]
            if closed:
                raise RuntimeError(f"postgresql runs as user postgres, which cannot enter "
                                   f"{closed[0]}: choose a folder outside it (e.g. under /tmp)")
        if not (self.data / "PG_VERSION").exists():
            self._run([pg_bin("initdb"), "-D", str(self.data), "-U", self.user,
                       "--auth=trust", "-E", "UTF8", "--locale=C"])
            if self.host != HOST:
                subnet = self.host.rsplit(".", 1)[0] + ".0/24"
                with (self.data / "pg_hba.conf").open("a") as hba:
                    hba.write(f"host all all {subnet} trust\n")
            if self.tls:
                self._make_tls()
        self._run([pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.base_dir / "log"),
                   "-w", "-t", "60", "start", "-o",
                   f"-p {self.port} -k {self.base_dir} -c listen_addresses={self.host} "
                   "-c fsync=off" + (" -c wal_level=logical -c max_replication_slots=10"
                                     " -c max_wal_senders=10" if self.logical else "")])
        wait_open(self.port, 30, "postgresql", self.host)
        return self

    @property
    def ca(self) -> Path:
        return self.data / "server.crt"

    def _make_tls(self) -> None:
        done = subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
             "-subj", f"/CN={self.host}", "-addext", f"subjectAltName=IP:{self.host}",
             "-keyout", str(self.data / "server.key"), "-out", str(self.ca)],
            capture_output=True, text=True, check=False, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"openssl req failed: {done.stderr.strip()}")
        os.chmod(self.data / "server.key", 0o600)
        os.chmod(self.ca, 0o644)
        if os.geteuid() == 0:
            for f in ("server.key", "server.crt"):
                shutil.chown(self.data / f, "postgres", "postgres")
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write("ssl = on\n")
        hba = self.data / "pg_hba.conf"
        # first match wins: TCP without TLS is refused before any trust line is reached
        hba.write_text("hostnossl all all all reject\n" + hba.read_text())

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run([pg_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"])

    def crash(self) -> None:
        """Down at once, as a server that lost its power: every connection cut, nothing
        flushed (`start` again recovers it from its log, on the same port)."""
        if (self.data / "postmaster.pid").exists():
            self._run([pg_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"])

    def create_database(self, name: str) -> str:
        self._run([pg_bin("createdb"), "-h", self.host, "-p", str(self.port), "-U", self.user,
                   name])
        return self.url(name)

    def url(self, database: str) -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/{database}"
