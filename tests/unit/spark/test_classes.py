"""The class archive's build: a training run that fails says so in one line and leaves the
archive there as it was (runs go on with it, or without one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_recon.errors import CannotRun
from kafka_recon.spark.classes import build

pytestmark = pytest.mark.unit


def test_a_failed_training_run_raises_and_leaves_the_archive_there_as_it_was(
        tmp_path: Path) -> None:
    archive = tmp_path / "spark-classes.jsa"
    archive.write_bytes(b"the archive of an earlier build")
    with pytest.raises(CannotRun, match=r"class archive .*spark-classes.jsa: the training run "
                                        r"failed \(exit [1-9]"):
        build(archive, master="no-such-master://", timeout_s=300)
    assert archive.read_bytes() == b"the archive of an earlier build"
    assert [p.name for p in tmp_path.iterdir()] == ["spark-classes.jsa"]  # no scratch left
