"""bench/run.py's memory sampler: a process's resident memory and its anonymous part."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench import run

pytestmark = pytest.mark.unit


def test_a_processs_anonymous_memory_is_part_of_its_resident_memory() -> None:
    held = bytearray(64 * 1024 * 1024)  # touched: resident, and anonymous
    held[:: 4096] = b"x" * len(held[:: 4096])
    name, rss_kb, anon_kb = run._rss_kb(os.getpid())
    # the program's name as the kernel keeps it (a pytest-xdist worker renames its process)
    assert name == Path(f"/proc/{os.getpid()}/comm").read_text().strip()
    assert 64 * 1024 <= anon_kb < rss_kb
    del held


def test_a_process_that_is_gone_reads_as_nothing() -> None:
    assert run._rss_kb(2 ** 22 + 1) == ("", 0, 0)


def test_a_server_named_first_among_the_masters_is_refused_at_once(
        capsys: pytest.CaptureFixture[str]) -> None:
    # it was started with "connect" as its own master and failed two minutes later, in the
    # server's log
    with pytest.raises(SystemExit):
        run.main(["--masters", "connect", "--records", "10"])
    assert "--masters connect: the first master" in capsys.readouterr().err
