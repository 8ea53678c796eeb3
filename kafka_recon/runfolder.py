"""The run folder: one per flow and window, `<runs root>/<flow>/<start>_<end>/`.

This module is the one place that knows the name of every file a run writes, which step writes
it, and which of them may be served to a browser. Steps read what earlier steps wrote and
replace their own output, so re-running a window is idempotent; `clear` removes a step's outputs
before it runs, so a failed re-run never leaves an older run's answer behind.

The journal (`steps.json`) records when each step started and finished: a run that stopped
half-way is concluded `inconclusive`, naming the step that did not finish.

One run of a window at a time: a run holds the folder (`.owner.json`: who, since when) from its
first step to its last. A second run is refused with a message naming the first, until the first
releases the folder, its process is gone (a command line run on this host), or it has been silent
for `KAFKA_RECON_RUN_STALE_HOURS` (a killed Airflow run). A command line run also holds an OS lock
on the folder for its whole life.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from kafka_recon.errors import RunInProgress, StepFailed
from kafka_recon.window import Window, iso_z

# the steps of a run, in order, and what each writes (files and folders, relative)
STEPS: dict[str, tuple[str, ...]] = {
    # the run's timings start with it: a failed re-run never shows the last run's
    "stage": ("staged", "stage.json", "audit.json", "flight.json", "timings.json"),
    "replay": ("replays", "replays.json"),
    "reconcile": ("reconcile.json", "result.json", "missing", "unexpected", "duplicate",
                  "filtered", "late", "unidentifiable"),
    "validate": ("validation.json", "gx"),
    "report": ("report.html", "report.txt", "mail.html", "chart.png"),
    "alert": ("alerts.json",),
}
ANALYSIS_STEPS = ("stage", "replay", "reconcile")  # without these there is no result

# what a browser may be given from a run folder: the report, the id files, the Data Docs
SERVED_FILES = ("report.html", "report.txt", "chart.png")
SERVED_FOLDERS = ("missing", "unexpected", "duplicate", "filtered", "late", "unidentifiable",
                  "gx/uncommitted/data_docs")


def window_folder_name(window: Window) -> str:
    """`2026-11-20T000000Z_2026-11-21T000000Z`: sortable, and no colon for any file system."""
    return "_".join(window.as_json().values()).replace(":", "")


def write_json(path: Path, payload: Any) -> None:
    """Whole or not at all: a reader never sees half a file, a re-run replaces it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=str))
    tmp.replace(path)


@dataclass(frozen=True)
class RunFolder:
    path: Path

    @classmethod
    def of(cls, root: Path, flow: str, window: Window) -> RunFolder:
        return cls(root / flow / window_folder_name(window))

    # ------------------------------------------------------------------ the files
    @property
    def result(self) -> Path:
        return self.path / "result.json"

    @property
    def stage(self) -> Path:
        return self.path / "stage.json"

    @property
    def audit(self) -> Path:
        return self.path / "audit.json"

    @property
    def flight(self) -> Path:
        """What the flight recorder saw of the topic over the window (the causes' evidence)."""
        return self.path / "flight.json"

    @property
    def replays(self) -> Path:
        return self.path / "replays.json"

    @property
    def aggregates(self) -> Path:
        return self.path / "reconcile.json"

    @property
    def validation(self) -> Path:
        return self.path / "validation.json"

    @property
    def report(self) -> Path:
        return self.path / "report.html"

    @property
    def journal(self) -> Path:
        return self.path / "steps.json"

    @property
    def timings(self) -> Path:
        return self.path / "timings.json"

    @property
    def alerts(self) -> Path:
        """What each Slack or PagerDuty alert of the window did."""
        return self.path / "alerts.json"

    def staged(self, tier: str) -> Path:
        return self.path / "staged" / f"{tier}.json"

    def replay_dir(self, n: int, tier: str) -> Path:
        return self.path / "replays" / tier / f"r{n}"

    def ids_file(self, kind: str, name: str) -> Path:
        """An id file: kind is missing, unexpected, duplicate, late or unidentifiable."""
        return self.path / kind / f"{name}.csv"

    # ------------------------------------------------------------------ reading and writing
    def write_json(self, path: Path, payload: Any) -> None:
        write_json(path, payload)

    def read_json(self, path: Path, step: str) -> Any:
        """A step's output; a missing one names the step that should have written it."""
        if not path.exists():
            raise StepFailed(step, FileNotFoundError(
                f"{path} is missing: the '{step}' step has not run for this window"))
        return json.loads(path.read_text())

    def clear(self, *steps: str) -> None:
        """Remove every output of these steps (and their journal entries) before they run."""
        for step in steps:
            for rel in STEPS[step]:
                target = self.path / rel
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target)
                else:
                    target.unlink(missing_ok=True)
        with self._guard():
            journal = self.steps()
            if journal:
                self.write_json(self.journal, {k: v for k, v in journal.items()
                                               if k.split(" ")[0] not in steps})

    # ------------------------------------------------------------------ the journal
    def steps(self) -> dict[str, dict[str, str]]:
        try:
            return dict(json.loads(self.journal.read_text()))
        except (OSError, ValueError):
            return {}

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Staging tasks run side by side: their read-modify-writes of the folder's state files
        (journal, owner) take this lock."""
        self.path.mkdir(parents=True, exist_ok=True)
        with (self.path / ".steps.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def mark(self, step: str, state: str, detail: str | None = None) -> None:
        """state: started, done or failed."""
        with self._guard():
            journal = self.steps()
            entry = {"state": state, "at": iso_z(datetime.now(UTC))}
            if detail:
                entry["detail"] = detail
            journal[step] = entry
            self.write_json(self.journal, journal)

    def unfinished(self) -> tuple[str, str | None] | None:
        """The first analysis step that did not finish, and what its journal says of it.

        A step may be journalled in parts (`stage orders_db`, one per staging task): a failed
        or unfinished part names the step before its missing end does.
        """
        journal = self.steps()
        for step in ANALYSIS_STEPS:
            parts = {k: v for k, v in journal.items() if k == step or k.startswith(step + " ")}
            for name, entry in parts.items():
                if entry.get("state") == "failed":
                    return name, entry.get("detail")
            for name, entry in parts.items():
                if entry.get("state") == "started":
                    return name, "it started but never finished (killed, or its process died)"
            if journal.get(step, {}).get("state") != "done":
                return step, ("it never began (its task failed before the step started, or an "
                              "earlier task failed; see the task logs)")
        return None

    # ------------------------------------------------------------------ one run at a time
    @property
    def owner_file(self) -> Path:
        return self.path / ".owner.json"

    def owner(self) -> dict[str, Any] | None:
        try:
            return dict(json.loads(self.owner_file.read_text()))
        except (OSError, ValueError):
            return None

    def _holds(self, current: dict[str, Any], stale: timedelta) -> bool:
        """Whether the run named in the owner file still holds the folder."""
        if current.get("released"):
            return False
        if current.get("host") == socket.gethostname() and current.get("pid"):
            try:
                os.kill(int(current["pid"]), 0)
            except ProcessLookupError:
                return False  # a command line run that died
            except PermissionError:
                pass
        # the last sign of life: its claim, or its newest journal entry (ISO text sorts as time)
        latest = max([e.get("at", "") for e in self.steps().values()]
                     + [current.get("since", "")])
        if not latest:
            return True
        heard = datetime.strptime(latest, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        return datetime.now(UTC) - heard < stale

    def claim(self, owner: str, stale: timedelta, pid: int | None = None) -> None:
        """Hold the folder for the run `owner`, or refuse naming the run that holds it."""
        with self._guard():
            current = self.owner()
            if current and current.get("owner") != owner and self._holds(current, stale):
                raise self._refusal(current)
            self.write_json(self.owner_file, {
                "owner": owner, "since": iso_z(datetime.now(UTC)), "host": socket.gethostname(),
                "pid": pid})

    def _refusal(self, held: dict[str, Any]) -> RunInProgress:
        return RunInProgress(
            f"{self.path}: another run of this window is under way "
            f"({held.get('owner', 'a command line run')}, since {held.get('since', '?')}): "
            "wait for it to finish, then run again")

    def check_owner(self, owner: str) -> None:
        """A step of run `owner` goes on only while that run holds the folder."""
        current = self.owner()
        if current and current.get("owner") != owner:
            raise RunInProgress(f"{self.path}: another run of this window ({current['owner']}) "
                                f"began after this one ({owner}); this run stops here")

    def release(self, owner: str) -> None:
        with self._guard():
            current = self.owner()
            if current and current.get("owner") == owner:
                self.write_json(self.owner_file, {**current, "released": True})

    @contextmanager
    def exclusive(self, owner: str, stale: timedelta) -> Iterator[None]:
        """A command line run: the OS lock for its whole life, and the owner mark for the
        Airflow runs that cannot share the lock."""
        self.path.mkdir(parents=True, exist_ok=True)
        handle: IO[str] = (self.path / ".run.lock").open("w")
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise self._refusal(self.owner() or {}) from None
            self.claim(owner, stale, pid=os.getpid())
            try:
                yield
            finally:
                self.release(owner)
        finally:
            handle.close()

    # ------------------------------------------------------------------ serving
    def servable(self, rel: str) -> Path | None:
        """The file a browser asked for, if it is a run artefact inside this folder."""
        root = self.path.resolve()
        target = (root / rel).resolve()
        if target.is_dir():
            target = (target / "index.html").resolve()
        if not target.is_relative_to(root) or not target.is_file():
            return None
        inside = target.relative_to(root).as_posix()
        allowed = inside in SERVED_FILES or any(
            inside.startswith(f"{folder}/") for folder in SERVED_FOLDERS)
        # never through a link, even one pointing inside: what is served is what was written
        return target if allowed and not _has_link(self.path, rel) else None


def _has_link(base: Path, rel: str) -> bool:
    p = base
    for part in Path(rel).parts:
        p = p / part
        if p.is_symlink():
            return True
    return (p / "index.html").is_symlink() if p.is_dir() else False
