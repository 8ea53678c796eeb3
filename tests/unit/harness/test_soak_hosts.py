"""harness/soak: the soak on two hosts' plan of faults and its checker's reading of a run
folder's journal (the soak itself is `make soak-hosts`, an hour, outside `make test`)."""

from __future__ import annotations

import json
import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from harness.soak.check import failed_steps
from harness.soak.host_faults import FAULTS
from harness.soak.hosts import schedule

pytestmark = pytest.mark.unit


def test_every_fault_strikes_twice_at_random_inside_the_soak_leaving_its_last_windows_room(
) -> None:
    began = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    ends = began + timedelta(minutes=60)
    plan = schedule(random.Random(7), began, ends)
    assert Counter(f.name for _, f in plan) == {f.name: 2 for f in FAULTS}
    times = [t for t, _ in plan]
    assert times == sorted(times)
    assert began + timedelta(minutes=3) <= times[0] <= began + timedelta(minutes=5)
    # a window a late fault touches still closes, and is judged, within the soak
    assert times[-1] <= ends - timedelta(minutes=3)
    assert schedule(random.Random(7), began, ends) == plan
    assert [f.name for _, f in schedule(random.Random(8), began, ends)] != \
        [f.name for _, f in plan]


def test_the_faults_cover_hosts_stores_scheduler_and_the_pipelines() -> None:
    assert {f.name for f in FAULTS} == {
        "host_killed", "network_cut", "s3_restart", "store_restart", "scheduler_restart",
        "broker_restart", "consumer_crash", "producer_retries"}


def test_the_checker_reads_which_steps_a_run_folders_journal_says_failed(tmp_path: Path
                                                                          ) -> None:
    assert failed_steps(tmp_path) == []
    steps = tmp_path / "steps"
    steps.mkdir()
    for name, state in (("stage", "done"), ("replay", "failed"), ("reconcile", "started")):
        (steps / f"{name}.json").write_text(json.dumps(
            {"schema_version": 2, "step": name, "state": state, "at": "2026-12-06T12:00:00Z"}))
    assert failed_steps(tmp_path) == ["replay"]


def test_the_checker_names_every_file_of_a_window_that_another_run_wrote(tmp_path: Path
                                                                         ) -> None:
    from harness.soak.check import mixed_runs

    mine, other = "recon__orders1/scheduled__1", "recon_adhoc/manual__2"

    def put(rel: str, run: str | None) -> None:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"schema_version": 2, **({"run": run} if run else {})}))

    assert mixed_runs(tmp_path) == []  # no result yet: nothing to hold the files to
    put("result.json", mine)
    put("stage.json", mine)
    put("steps/stage.json", mine)
    put("staged/orders_db.json", mine)
    assert mixed_runs(tmp_path) == []
    put("reconcile.json", other)  # a run cut off from the store wrote on
    put("steps/replay.json", None)
    assert mixed_runs(tmp_path) == [f"reconcile.json: {other}", "steps/replay.json: None"]
    put("result.json", None)
    assert mixed_runs(tmp_path) == ["result.json: no run named"]


class _Host:
    def __init__(self, name: str) -> None:
        self.name = name
        self.events: list[str] = []

    def kill(self) -> None:
        self.events.append("killed")

    def cut(self) -> None:
        self.events.append("cut")

    def mend(self) -> None:
        self.events.append("mended")


class _Deployed:
    """A deployment as far as the host faults reach into it: which host runs whose Spark step
    (a fake: the real one asks Airflow's API, in `make soak-hosts`)."""

    def __init__(self, step: tuple[_Host, str] | None) -> None:
        self.workers = [_Host("w1"), _Host("w2")]
        self.step = step
        self.revived: list[str] = []

    def spark_step_host(self, wait_s: float) -> tuple[_Host, str] | None:
        return self.step

    def revive_worker(self, host: _Host) -> None:
        self.revived.append(host.name)


def test_a_host_fault_names_the_run_whose_spark_step_it_struck(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.soak import host_faults

    monkeypatch.setattr(host_faults.time, "sleep", lambda s: None)
    w2 = _Host("w2")
    d = _Deployed((w2, "recon__orders1 scheduled__2026-12-06T17:35:00+00:00"))
    note = host_faults.host_killed(d, random.Random(1))  # type: ignore[arg-type]
    assert w2.events == ["killed"] and d.revived == ["w2"]
    assert "w2 killed whole while it ran the Spark step of recon__orders1 " \
           "scheduled__2026-12-06T17:35:00+00:00" in note
    note = host_faults.network_cut(d, random.Random(1))  # type: ignore[arg-type]
    assert w2.events == ["killed", "cut", "mended"]
    assert note.endswith("while it ran the Spark step of recon__orders1 "
                         "scheduled__2026-12-06T17:35:00+00:00")
    # no step ran: a host at random, and the note says no step ran
    idle = _Deployed(None)
    assert "no Spark step ran" in host_faults.host_killed(idle, random.Random(1))  # type: ignore[arg-type]
    assert "Spark step" not in host_faults.network_cut(idle, random.Random(1))  # type: ignore[arg-type]
