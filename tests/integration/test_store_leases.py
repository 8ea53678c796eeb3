"""One run per window across hosts, on PostgreSQL: two processes race for a window and exactly
one wins, naming itself to the other; a holder that dies stops holding once its lease expires;
a store that stopped answering is one line naming it, and nothing is run as if it held."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.services.postgres import PostgresServer

pytestmark = pytest.mark.integration

WINDOW = {"start": "2026-11-20T00:00:00Z", "end": "2026-11-21T00:00:00Z"}

# one host's attempt: claim the window, say what happened as one JSON line, hold it a while
CLAIM = """
import json, sys, time
from kafka_recon.errors import ReconError
from kafka_recon.stores.lease import Lease
lease = Lease.of("orders", json.loads(sys.argv[1]))
sys.stdout.write("ready\\n"); sys.stdout.flush(); sys.stdin.readline()
try:
    lease.claim(sys.argv[2])
    print(json.dumps({"won": sys.argv[2]}), flush=True)
except ReconError as e:
    print(json.dumps({"refused": str(e)}), flush=True)
time.sleep(float(sys.argv[3]))
"""


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Iterator[PostgresServer]:
    """A PostgreSQL of this test's own: the test stops it."""
    base = Path(tempfile.mkdtemp(prefix="kafka-recon-pg-lease-"))
    server = PostgresServer(base).start()
    monkeypatch.setenv("KAFKA_RECON_STORE", server.create_database("recon_store"))
    monkeypatch.setenv("KAFKA_RECON_LEASE_SECONDS", "10")
    yield server
    server.stop()
    shutil.rmtree(base, ignore_errors=True)


def _hosts(owners: list[str], hold: float, window: dict[str, str] = WINDOW
           ) -> list[subprocess.Popen[str]]:
    procs = [subprocess.Popen([sys.executable, "-c", CLAIM, json.dumps(window), o, str(hold)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for o in owners]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    for p in procs:  # as close to the same moment as two processes get
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    return procs


def test_two_hosts_racing_for_a_window_one_wins_and_the_other_is_refused_naming_it(
        store: PostgresServer) -> None:
    from kafka_recon.stores.lease import Lease

    for attempt in range(3):  # each round a fresh window: the race itself, three times
        window = {**WINDOW, "end": f"2026-11-2{1 + attempt}T00:00:00Z"}
        owners = [f"recon__orders/run_a{attempt}", f"recon_adhoc/run_b{attempt}"]
        procs = _hosts(owners, 0, window)
        said = [json.loads(p.communicate(timeout=60)[0].strip().splitlines()[-1])
                for p in procs]
        won = [s["won"] for s in said if "won" in s]
        refused = [s["refused"] for s in said if "refused" in s]
        assert len(won) == 1 and len(refused) == 1, said
        assert f"another run of this window is under way ({won[0]} on " in refused[0]
        assert Lease.of("orders", window).holder().owner == won[0]


def test_a_holder_that_died_holds_the_window_until_its_lease_expires(
        store: PostgresServer) -> None:
    from kafka_recon.errors import RunInProgress
    from kafka_recon.stores.lease import Lease

    holder = _hosts(["recon__orders/killed_worker"], hold=300)[0]
    assert holder.stdout is not None
    assert json.loads(holder.stdout.readline()) == {"won": "recon__orders/killed_worker"}
    holder.kill()  # an Airflow task's lease names no process: only its expiry frees it
    holder.wait()
    lease = Lease.of("orders", WINDOW)
    with pytest.raises(RunInProgress, match="killed_worker"):
        lease.claim("recon__orders/rerun")
    deadline = time.monotonic() + 30
    while True:
        try:
            lease.claim("recon__orders/rerun")
            break
        except RunInProgress:
            assert time.monotonic() < deadline, "the lease never expired"
            time.sleep(1)
    assert lease.holder().owner == "recon__orders/rerun"


def test_a_store_that_stopped_is_one_line_naming_it_and_no_step_goes_on(
        store: PostgresServer) -> None:
    from kafka_recon.errors import StoreUnreachable
    from kafka_recon.stores.lease import Lease

    lease = Lease.of("orders", WINDOW)
    lease.claim("recon__orders/r1")
    store.stop()
    with pytest.raises(StoreUnreachable, match=rf"^kafka-recon's store \(postgresql at "
                                               rf"127.0.0.1:{store.port}/recon_store\) did not "
                                               "answer: ") as err:
        lease.check("recon__orders/r1")  # what every task does before its step
    assert "\n" not in str(err.value)
    store.start()
    lease.check("recon__orders/r1")  # back: the same run goes on, the lease is still its
