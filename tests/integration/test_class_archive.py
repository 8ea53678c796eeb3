"""The Spark driver's class archive (kafka_recon.spark.classes): made by a training run, mapped
by a driver that is given it, and harmless when it does not fit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_recon.settings import class_archive_path

pytestmark = pytest.mark.integration

CLI = str(Path(sys.executable).parent / "kafka-recon")

# a driver given the archive: does its JVM map the file, and does a job still answer right
PROBE = """
import json, sys
from pathlib import Path
from kafka_recon.spark.conf import archive_options
from kafka_recon.spark.session import session
s = session("probe", master="local[1]", driver_options=archive_options(Path(sys.argv[1])))
pid = int(s.sparkContext._jvm.ProcessHandle.current().pid())
mapped = sys.argv[1] in Path(f"/proc/{pid}/maps").read_text()
answer = s.range(1000).selectExpr("sum(id) AS n").collect()[0]["n"]
print(json.dumps({"mapped": mapped, "answer": answer}))
"""


def probe(archive: Path) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", PROBE, str(archive)], capture_output=True,
                          text=True, timeout=300, check=True,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The archive `make setup` made with `kafka-recon class-archive` (`make test` requires it);
    outside make, one made here the same way (about a minute)."""
    setup = class_archive_path()
    if setup is not None and setup.is_file():
        return setup
    if os.environ.get("KAFKA_RECON_REQUIRE_CLASS_ARCHIVE") == "1":
        pytest.fail(f"make setup made no class archive at {setup}: see its warning")
    archive = tmp_path_factory.mktemp("classes") / "spark-classes.jsa"
    done = subprocess.run([CLI, "class-archive", "--out", str(archive)], capture_output=True,
                          text=True, timeout=600, check=False,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == f"class archive: {archive}"
    assert [p.name for p in archive.parent.iterdir()] == [archive.name]  # no scratch left
    return archive


def test_a_made_archive_is_mapped_by_the_driver(made: Path) -> None:
    assert made.stat().st_size > 10 * 1024 * 1024  # tens of thousands of classes
    assert probe(made) == {"mapped": True, "answer": 499500}


def test_a_corrupt_archive_is_ignored_and_the_answer_is_the_same(tmp_path: Path) -> None:
    # the JVM checks the archive, drops it, and loads its classes from the jars
    archive = tmp_path / "spark-classes.jsa"
    archive.write_bytes(os.urandom(1 << 20))
    assert probe(archive) == {"mapped": False, "answer": 499500}
