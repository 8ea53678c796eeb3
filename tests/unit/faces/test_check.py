"""`kafka-recon check`'s parts that need no cluster: the window it reads, bad configs named
field by field, and the exit code."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kafka_recon.faces.check import last_closed_window
from kafka_recon.faces.cli import main
from tests.factories import flow

pytestmark = pytest.mark.unit


def test_the_window_read_is_the_latest_whose_closing_time_has_passed() -> None:
    f = flow()  # 1d windows, closing 15m after their end (10m grace, 5m disorder)
    assert f.closing == timedelta(minutes=15)
    w = last_closed_window(f, datetime(2026, 11, 26, 0, 14, tzinfo=UTC))
    assert (w.start, w.end) == (datetime(2026, 11, 24, tzinfo=UTC),
                                datetime(2026, 11, 25, tzinfo=UTC))
    w = last_closed_window(f, datetime(2026, 11, 26, 0, 15, tzinfo=UTC))
    assert w.end == datetime(2026, 11, 26, tzinfo=UTC)


def test_every_bad_field_of_every_flow_is_a_line_of_its_own_and_the_exit_is_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "flows.yaml"
    config.write_text("""flows:
  a:
    owners: [x@example.com]
    grase: 10m
    record: {id: "order_id", event_time: "$.t"}
    tiers:
      - {name: t, type: kafka, bootstrap: "127.0.0.1:1", topic: t}
  b:
    owners: []
    record: {id: "$.id", event_time: "$.t"}
    tiers: []
""")
    assert main(["check", "--config", str(config)]) == 2
    out = capsys.readouterr().out
    errors = [line for line in out.splitlines() if line.startswith("  error: ")]
    assert any("flow 'a', field 'grase'" in e for e in errors)
    assert any("flow 'a', field 'record.id'" in e for e in errors)
    assert any("flow 'b', field 'owners'" in e for e in errors)
    assert any("flow 'b', field 'tiers'" in e for e in errors)
    assert "0 of 2 flow(s) could run; not: a, b" in out


def test_a_missing_flow_config_names_where_it_was_looked_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    for var in ("KAFKA_RECON_CONFIG", "KAFKA_RECON_HOME", "AIRFLOW__KAFKA_RECON__CONFIG",
                "AIRFLOW__KAFKA_RECON__HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["check"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kafka-recon: no flow config at {tmp_path / 'flows.yaml'} ")
    assert "the current directory" in err and len(err.strip().splitlines()) == 1


def test_kafka_recons_own_stores_are_checked_and_one_that_does_not_answer_fails_the_check(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from kafka_recon.faces.check import check_stores

    monkeypatch.setenv("KAFKA_RECON_SNAPSHOTS", str(tmp_path / "snapshots.db"))
    monkeypatch.setenv("KAFKA_RECON_OUT", str(tmp_path / "runs"))
    ok = check_stores()
    assert ok.could_run, ok.errors
    assert ok.lines[0].startswith("store: sqlite file ") and "0 window(s) held" in ok.lines[0]
    assert ok.lines[1] == (f"runs root: {tmp_path / 'runs'}: a folder on this host (every host "
                           "must share it, or use s3://)")
    assert "nothing snapshotted yet" in ok.lines[2]
    (tmp_path / "a-folder").mkdir()
    monkeypatch.setenv("KAFKA_RECON_STORE", f"sqlite:///{tmp_path / 'a-folder'}")
    bad = check_stores()
    assert [e.split(":")[0] for e in bad.errors] == ["store"]
    assert "kafka-recon's store (sqlite file" in bad.errors[0]
    config = tmp_path / "flows.yaml"
    config.write_text("flows: {}\n")
    assert main(["check", "--config", str(config)]) == 2
    assert "kafka-recon's stores: 1 of 3 do not answer" in capsys.readouterr().out
