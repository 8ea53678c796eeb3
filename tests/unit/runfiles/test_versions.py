"""Every run file carries its schema version: a file an older kafka-recon wrote is upgraded as
it is read, one a newer one wrote (or one that is not the contract) is refused in one line
naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_recon.errors import ResultError
from kafka_recon.result.model import Result
from kafka_recon.runfiles.journal import StepEntry
from kafka_recon.runfiles.outcomes import Alerts, Timings
from kafka_recon.runfiles.stage import Stage
from kafka_recon.runfolder import RunFolder
from tests.factories import result

pytestmark = pytest.mark.unit


def write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_files_written_before_versions_were_kept_are_read_as_the_current_version(
        tmp_path: Path) -> None:
    stage = Stage.load(write(tmp_path / "stage.json", [
        {"name": "db", "kind": "ids", "count": 3, "distinct": 3}]))
    assert (stage.schema_version, stage.point("db").count, stage.run) == (2, 3, None)
    timings = Timings.load(write(tmp_path / "timings.json",
                                 {"stage": 1.5, "spark_jobs": {"total": 4}}))
    assert (timings.laps, timings.spark_jobs) == ({"stage": 1.5}, {"total": 4})
    alerts = Alerts.load(write(tmp_path / "alerts.json", [
        {"type": "slack", "conn": "s", "event": "findings", "sent": False, "error": "E: x"}]))
    assert alerts.failed == ["slack (s): E: x"]


def test_a_result_without_a_version_reads_and_is_written_back_with_it_first(
        tmp_path: Path) -> None:
    old = result("orders").as_json()
    old.pop("schema_version")
    read = Result.load(write(tmp_path / "result.json", old))
    assert read == result("orders")
    folder = RunFolder(tmp_path / "run")
    assert next(iter(json.loads(folder.write(read).read_text()))) == "schema_version"


def test_a_file_from_a_newer_kafka_recon_is_refused_naming_it(tmp_path: Path) -> None:
    newer = {**result("orders").as_json(), "schema_version": 3}
    with pytest.raises(ResultError) as err:
        Result.load(write(tmp_path / "result.json", newer))
    assert str(err.value) == (f"{tmp_path / 'result.json'}: schema version 3 was written by a "
                              "newer kafka-recon (this one reads up to 2)")


def test_a_file_of_the_version_before_runs_were_named_reads_as_written_by_no_known_run(
        tmp_path: Path) -> None:
    v1 = {**result("orders").as_json(), "schema_version": 1}
    read = Result.load(write(tmp_path / "result.json", v1))
    assert (read.schema_version, read.run) == (2, None)
    entry = StepEntry.load(write(tmp_path / "stage.json", {
        "schema_version": 2, "step": "stage", "state": "done", "at": "2026-11-20T00:00:00Z"}))
    assert (entry.schema_version, entry.run) == (3, None)


def test_every_file_a_run_writes_once_it_holds_its_window_names_that_run(tmp_path: Path
                                                                         ) -> None:
    folder = RunFolder(tmp_path / "run")
    folder.write(result("orders"))
    # outside a run: left out, as a result does with what it does not carry
    assert "run" not in json.loads((folder.path / "result.json").read_text())
    folder.held_by("recon__orders/scheduled__2026-12-06T12:00:00+00:00")
    folder.mark("stage", "done")
    folder.write(result("orders"))
    for path in (folder.path / "result.json", next((folder.path / "steps").iterdir())):
        assert json.loads(path.read_text())["run"] == \
            "recon__orders/scheduled__2026-12-06T12:00:00+00:00"


def test_a_field_that_is_not_the_contract_is_refused_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(ResultError, match=r"stage.json: field 'points.0.kind': Input should "
                                          "be 'ids' or 'counts'"):
        Stage.load(write(tmp_path / "stage.json", {
            "schema_version": 1, "points": [{"name": "db", "kind": "rows", "count": 3}]}))
    with pytest.raises(ResultError, match="field 'points.0.cuont': Extra inputs"):
        Stage.load(write(tmp_path / "s2.json", {
            "schema_version": 1, "points": [{"name": "db", "kind": "ids", "cuont": 3,
                                             "count": 3}]}))


def test_a_step_output_that_is_missing_names_the_step_that_should_have_written_it(
        tmp_path: Path) -> None:
    from kafka_recon.errors import StepFailed

    with pytest.raises(StepFailed, match="stage.json is missing: the 'stage' step has not run"):
        RunFolder(tmp_path).read(Stage, "stage")
    assert RunFolder(tmp_path).read_if(Stage) is None


def test_a_journal_of_one_steps_json_is_refused_as_an_entry_naming_why(tmp_path: Path) -> None:
    old = write(tmp_path / "stage.json", {"schema_version": 1, "steps": {
        "stage": {"state": "done", "at": "2026-11-20T00:00:00Z"}}})
    with pytest.raises(ResultError) as err:
        StepEntry.load(old)
    assert str(err.value) == (f"{old}: written as one steps.json by kafka-recon before journal "
                              "entries were one file each")
