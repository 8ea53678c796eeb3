"""The run folder: a step's outputs cleared before it runs, the journal, what may be served, and
a run that stopped half-way concluded inconclusive, naming the step."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kafka_recon import orchestrate
from kafka_recon.runfiles.outcomes import AlertOutcome, Alerts, Timings, Validation
from kafka_recon.runfolder import RunFolder
from tests.factories import FLOWS, finding, result

pytestmark = pytest.mark.unit

START, END = "2026-11-20T00:00:00Z", "2026-11-21T00:00:00Z"


@pytest.fixture
def run(tmp_path: Path) -> orchestrate.Run:
    return orchestrate.load("demo", START, END, FLOWS, tmp_path / "run")


def _previous_ok_run(run: orchestrate.Run) -> None:
    """What an earlier, successful run of the same window left behind."""
    folder = run.folder
    folder.write(result("demo"))
    folder.write(Validation(success=True, suites={}))
    (run.out / "report.html").write_text("old report: OK")
    (run.out / "missing").mkdir()
    (run.out / "missing" / "orders_db__orders_topic.csv").write_text("id\n")
    for step in ("stage", "replay", "reconcile"):
        folder.mark(step, "done")
    # what the run's alerts did and how long its steps took: a failed re-run must not show them
    folder.write(Alerts(alerts=[AlertOutcome(type="slack", conn="s", event="failure",
                                             sent=True)]))
    folder.write(Timings(laps={"stage": 1.0}))


def test_begin_clears_every_output_of_an_earlier_run(run: orchestrate.Run) -> None:
    _previous_ok_run(run)
    orchestrate.begin(run)
    left = sorted(p.name for p in run.out.iterdir() if not p.name.startswith("."))
    # the journal's folder may stay, empty: no entry of the earlier run is left in it
    assert left in ([], ["steps"]) and run.folder.steps() == {}
    assert not list((run.out / "steps").glob("*"))


def test_a_run_whose_replay_failed_concludes_inconclusive_naming_it_not_the_old_ok(
        run: orchestrate.Run) -> None:
    _previous_ok_run(run)
    orchestrate.begin(run)
    run.folder.mark("stage", "done")
    run.folder.mark("replay", "started")  # spark-submit was killed: no end was written
    concluded = orchestrate.conclude(run)
    assert concluded.status == "inconclusive"
    assert concluded.reasons == ["the 'replay' step did not finish: it started but never "
                                 "finished (killed, or its process died)"]
    assert json.loads(run.folder.result.read_text())["status"] == "inconclusive"


def test_a_step_that_never_started_is_named_after_the_last_that_finished(
        run: orchestrate.Run) -> None:
    orchestrate.begin(run)
    run.folder.mark("stage", "done")  # then the replay task failed before running any code
    assert orchestrate.conclude(run).reasons == [
        "the 'replay' step did not finish: it never began (its task failed before the "
        "step started, or an earlier task failed; see the task logs)"]


def test_a_failed_staging_task_is_named_with_its_reason(run: orchestrate.Run) -> None:
    orchestrate.begin(run)
    run.folder.mark("stage orders_db", "started")
    run.folder.mark("stage warehouse", "failed", "OSError: disk full")
    assert orchestrate.conclude(run).reasons == [
        "the 'stage warehouse' step did not finish: OSError: disk full"]


def test_a_finished_run_concludes_with_its_own_result(run: orchestrate.Run) -> None:
    orchestrate.begin(run)
    mine = result("demo", findings=[finding("loss", "write", "orders_db->orders_topic", 3)])
    run.folder.write(mine)
    for step in ("stage", "replay", "reconcile"):
        run.folder.mark(step, "done")
    assert orchestrate.conclude(run) == mine


def test_only_run_artefacts_are_served(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    folder = RunFolder(root / "f" / "w")
    (folder.path / "missing").mkdir(parents=True)
    (folder.path / "missing" / "a__b.csv").write_text("id\n1\n")
    docs = folder.path / "gx" / "uncommitted" / "data_docs" / "local_site"
    docs.mkdir(parents=True)
    (docs / "index.html").write_text("docs")
    for name in ("report.html", "result.json", "stage.json", "steps.json"):
        (folder.path / name).write_text("x")
    (folder.path / "gx" / "great_expectations.yml").write_text("x")
    (root / "history.db").write_text("x")
    (root / "flume.db").write_text("x")
    assert folder.servable("report.html") == (folder.path / "report.html").resolve()
    assert folder.servable("missing/a__b.csv") is not None
    assert folder.servable("gx/uncommitted/data_docs/local_site") == (docs / "index.html"
                                                                      ).resolve()
    for rel in ("result.json", "stage.json", "steps.json", "gx/great_expectations.yml",
                "../../history.db", "../../flume.db", "missing", "nothing.html"):
        assert folder.servable(rel) is None, rel


def test_a_link_inside_a_run_folder_is_never_followed(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "runs" / "f" / "w")
    (folder.path / "missing").mkdir(parents=True)
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    os.symlink(secret, folder.path / "missing" / "x.csv")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "index.html").write_text("secret")
    os.symlink(outside, folder.path / "unexpected")
    docs = folder.path / "gx" / "uncommitted" / "data_docs"
    docs.mkdir(parents=True)
    os.symlink(secret, docs / "index.html")
    assert folder.servable("missing/x.csv") is None
    assert folder.servable("unexpected") is None and folder.servable("unexpected/index.html") \
        is None
    assert folder.servable("gx/uncommitted/data_docs") is None


def test_steps_journalled_at_once_by_many_processes_are_all_kept(tmp_path: Path) -> None:
    """Staging tasks on several hosts journal their parts at the same moment: each writes its
    own entry, none reads and rewrites another's, so none is lost (an object store has no
    lock to serialise them)."""
    import multiprocessing

    folder = RunFolder(tmp_path / "run")
    names = [f"stage tier_{i}" for i in range(12)]
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=folder.mark, args=(n, "done")) for n in names]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    assert sorted(folder.steps()) == sorted(names)
    assert all(e.state == "done" for e in folder.steps().values())


def test_staging_side_by_side_runs_every_part_then_raises_the_source_that_failed(
        run: orchestrate.Run, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from kafka_recon.errors import SourceUnreadable

    ran: list[str] = []
    both = threading.Barrier(len(orchestrate.staged_tiers(run.flow)) + 1, timeout=10)

    def tier(r: orchestrate.Run, name: str) -> None:
        both.wait()  # every part is under way at once: none waits for another to end
        ran.append(name)
        if name == "warehouse":
            raise SourceUnreadable("tier 'warehouse': database is locked")

    def topic(r: orchestrate.Run) -> None:
        both.wait()
        ran.append("topic")
        raise RuntimeError("audit failed")

    monkeypatch.setattr(orchestrate, "stage_tier", tier)
    monkeypatch.setattr(orchestrate, "stage_topic", topic)
    monkeypatch.setattr(orchestrate, "gather_stage", lambda r: pytest.fail("gathered"))
    with pytest.raises(SourceUnreadable, match="warehouse"):
        orchestrate.stage(run, side_by_side=True)
    assert sorted(ran) == sorted([*orchestrate.staged_tiers(run.flow), "topic"])


def test_a_topic_deleted_during_the_window_says_what_the_recorder_saw(
        run: orchestrate.Run, monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_recon.cluster import snapshots
    from kafka_recon.runfiles.flight import Flight, Timeline

    tier = run.flow.topic_tier.name
    seen = Timeline(snapshots=4, first=START, last="2026-11-20T06:15:00Z")
    monkeypatch.setattr(snapshots, "flight_over",
                        lambda flow, window: Flight(topics={tier: seen}))
    said = orchestrate._last_seen(run, tier)
    assert said.startswith("it was deleted during the window (topic_deleted): the flight "
                           f"recorder saw it in 4 snapshot(s) from {START} to "
                           "2026-11-20T06:15:00Z, and not since")
    # seen only before the window: a topic missing all along, said as such
    monkeypatch.setattr(snapshots, "flight_over", lambda flow, window: Flight(topics={
        tier: Timeline(snapshots=2, first="2026-11-18T00:00:00Z", last="2026-11-19T00:00:00Z")}))
    assert orchestrate._last_seen(run, tier) == ""
