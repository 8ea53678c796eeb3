"""The command line as a wheel's users call it: `/opt/<venv>/bin/kafka-recon`, the virtualenv
not activated, and the first `python3` on PATH a Python without kafka-recon's packages. Every
command that starts Spark gives its workers kafka-recon's own Python: `run`, `repair plan` and
`repair deliver` (whose workers publish the records, in Python) all work. A Python worker that
fails all the same ends the command in one line naming the worker's own last exception, never
a traceback."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.services.kafka import KafkaCluster
from tests.integration.engine_harness import END, START, Scenario

pytestmark = pytest.mark.integration

CLI = str(Path(sys.executable).parent / "kafka-recon")
BARE = "/usr/bin/python3"  # Debian's: none of kafka-recon's packages


def _bare_path(tmp: Path) -> dict[str, str]:
    """The environment of a shell where the virtualenv was never activated, and PATH's first
    python3 is a bare one."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for name in ("python3", "python"):
        (bin_dir / name).symlink_to(BARE)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{bin_dir}:/usr/bin:/bin"
    return env


def _cli(*args: str, env: dict[str, str], scn: Scenario) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args, "--config", str(scn.config), "--flow", "f", "--start",
                           START.isoformat(), "--end", END.isoformat(), "--out", str(scn.out),
                           "--master", "local[1]"],
                          capture_output=True, text=True, timeout=600, check=False, env=env)


def test_run_repair_plan_and_deliver_work_without_the_virtualenv_activated(
        kafka: KafkaCluster, tmp_path: Path) -> None:
    check = subprocess.run([BARE, "-c", "import upath"], capture_output=True, check=False)
    assert check.returncode != 0, f"{BARE} must lack kafka-recon's packages for this test"
    scn = Scenario(tmp_path, kafka.bootstrap)
    scn.out = tmp_path / "run"
    scn.flow_through(12, sink_lacks={3, 7})
    env = _bare_path(tmp_path)

    ran = _cli("run", env=env, scn=scn)
    assert ran.returncode == 1, ran.stdout + ran.stderr[-3000:]
    assert "2 record(s) lost on the consume side (topic->sink)" in ran.stdout

    planned = _cli("repair", "plan", env=env, scn=scn)
    assert planned.returncode == 0, planned.stdout + planned.stderr[-3000:]
    digest = re.search(r"^plan ([0-9a-f]+):", planned.stdout, re.MULTILINE)
    assert digest, planned.stdout

    # the delivery's workers run Python: the one that failed with No module named 'upath'
    delivered = _cli("repair", "deliver", "--plan", digest.group(1), env=env, scn=scn)
    assert delivered.returncode == 0, delivered.stdout + delivered.stderr[-3000:]
    assert (f"topic->sink: 2 record(s) published to '{scn.topic}.kafka-recon-repair', "
            "0 delivered before") in delivered.stdout

    # a worker's Python that cannot import kafka-recon, given on purpose: one line names it
    broken = _cli("repair", "deliver", "--plan", digest.group(1),
                  env={**env, "PYSPARK_PYTHON": BARE}, scn=scn)
    assert broken.returncode == 2, broken.stdout + broken.stderr
    last = broken.stderr.strip().splitlines()[-1]
    assert re.fullmatch(r"kafka-recon: .*a Spark worker failed: ModuleNotFoundError: "
                        r"No module named '\w+'", last), last
    assert len(last) < 300, last
    assert "Traceback" not in broken.stderr, broken.stderr[-3000:]
