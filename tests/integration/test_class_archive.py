"""The Spark driver's class archive (kafka_recon.spark.classes): made by a training run, mapped
by a driver that is given it, and harmless when it does not fit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

CLI = str(Path(sys.executable).parent / "kafka-recon")

# a driver given the archive: does its JVM map the file, and does a job still answer right
PROBE = """
import json, sys
from pathlib import Path
from kafka_recon.spark.session import archive_options, session
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


def test_a_made_archive_is_mapped_by_the_driver_and_a_corrupt_one_is_ignored(
        tmp_path: Path) -> None:
    archive = tmp_path / "spark-classes.jsa"
    made = subprocess.run([CLI, "class-archive", "--out", str(archive)], capture_output=True,
                          text=True, timeout=600, check=False,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    assert made.returncode == 0, made.stderr[-2000:]
    assert made.stdout.strip() == f"class archive: {archive}"
    assert archive.stat().st_size > 10 * 1024 * 1024  # tens of thousands of classes
    assert [p.name for p in tmp_path.iterdir()] == [archive.name]  # no scratch file left
    assert probe(archive) == {"mapped": True, "answer": 499500}
    # corrupt: the JVM checks the archive, drops it, and loads its classes from the jars
    archive.chmod(0o644)
    archive.write_bytes(os.urandom(1 << 20))
    assert probe(archive) == {"mapped": False, "answer": 499500}
