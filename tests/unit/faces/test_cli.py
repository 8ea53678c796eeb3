"""The command line's choice of flows: one flow is read alone; a command over every flow runs
the valid ones and names each bad one."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from kafka_recon.errors import ConfigError, FlowInvalid
from kafka_recon.faces.cli import _selected_flows
from tests.unit.test_config import BAD_SIBLING, write

pytestmark = pytest.mark.unit


def test_a_named_flow_runs_whatever_another_flow_of_the_file_says(tmp_path: Path) -> None:
    path = write(tmp_path, BAD_SIBLING)
    flows, bad = _selected_flows(argparse.Namespace(config=path, flow="orders"))
    assert list(flows) == ["orders"] and bad == 0
    with pytest.raises(FlowInvalid, match="field 'tolerance.loss'"):
        _selected_flows(argparse.Namespace(config=path, flow="payments"))


def test_every_valid_flow_is_taken_and_each_bad_one_named_on_stderr(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, BAD_SIBLING)
    flows, bad = _selected_flows(argparse.Namespace(config=path, flow=None))
    assert list(flows) == ["orders"] and bad == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("kafka-recon: flow 'payments' skipped: ")
    assert "field 'tolerance.loss'" in line


def test_a_file_that_cannot_be_parsed_is_still_the_error_of_every_command(
        tmp_path: Path) -> None:
    path = write(tmp_path, "flows: [not, a, mapping]\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        _selected_flows(argparse.Namespace(config=path, flow=None))
