"""The faults the soak on two hosts strikes with, each shown to do what it says: a host's
network cut and mended (harness.services.lab), a PostgreSQL crashed and started again, the S3
server killed and started again on its address (harness.services.postgres, .s3)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.services.lab import Host, Lab
from harness.services.postgres import PostgresServer
from harness.services.s3 import S3Server
from kafka_recon.settings import REPO_ROOT

pytestmark = pytest.mark.integration


@pytest.fixture
def lab() -> Iterator[Lab]:
    # its own prefix and subnet: the two-hosts test's lab may run beside it
    lab = Lab("rcf", 78, keep=[REPO_ROOT]).start()
    try:
        yield lab
    finally:
        lab.stop()


def _reaches(host: Host, address: str, port: int) -> bool:
    """Whether a process on `host` opens a TCP connection to address:port within 2 s."""
    probe = f"import socket; socket.create_connection(({address!r}, {port}), 2).close()"
    done = subprocess.run(host.command([sys.executable, "-c", probe]), capture_output=True,
                          timeout=60, check=False)
    return done.returncode == 0


def test_a_cut_host_reaches_nothing_until_its_link_is_mended(lab: Lab) -> None:
    host = lab.host("w1")
    server = socket.create_server((lab.address, 0))
    port = server.getsockname()[1]

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    try:
        assert _reaches(host, lab.address, port)
        host.cut()
        assert not _reaches(host, lab.address, port)
        host.mend()
        assert _reaches(host, lab.address, port)
    finally:
        server.close()


def test_a_crashed_postgresql_starts_again_on_its_port_with_what_it_had_committed() -> None:
    import psycopg2

    # a folder user postgres may enter (pytest's own are the test user's alone)
    base = Path(tempfile.mkdtemp(prefix="kafka-recon-pgcrash-"))
    pg = PostgresServer(base).start()
    try:
        url = pg.create_database("store")
        with psycopg2.connect(url) as con, con.cursor() as cur:
            cur.execute("CREATE TABLE t (id INT)")
            cur.execute("INSERT INTO t VALUES (7)")
        open_con = psycopg2.connect(url)
        pg.crash()
        # every connection was cut
        with pytest.raises(psycopg2.OperationalError), open_con.cursor() as cur:
            cur.execute("SELECT 1")
        pg.start()
        with psycopg2.connect(url) as con, con.cursor() as cur:
            cur.execute("SELECT id FROM t")
            assert cur.fetchall() == [(7,)]
    finally:
        pg.stop()
        shutil.rmtree(base, ignore_errors=True)


def test_a_killed_s3_server_starts_again_at_its_endpoint_with_its_objects(
        tmp_path: Path) -> None:
    s3 = S3Server(tmp_path / "s3").start()
    try:
        s3.make_bucket("b")
        (s3.data / "b" / "kept.txt").write_text("kept")
        s3.kill()
        with pytest.raises(OSError):  # refused, or reset while it went down
            urllib.request.urlopen(s3.endpoint, timeout=5)
        s3.start()
        try:
            urllib.request.urlopen(f"{s3.endpoint}/b/kept.txt", timeout=10)
        except urllib.error.HTTPError as exc:
            # anonymous: refused, which only a server that answers can say
            assert exc.code == 403
    finally:
        s3.stop()
