"""The run folder: one per flow and window, `<runs root>/<flow>/<start>_<end>/`.

This module is the one place that knows the name of every file a run writes (`FILES`), which
step writes it, and which of them may be served to a browser. Each JSON file has one model with
a `schema_version` (kafka_recon.runfiles, and the result's kafka_recon.result.model), written
whole by `write` and read back by `read`, which refuses, in one line, a file it cannot read.
Steps read what earlier steps wrote and replace their own output, so re-running a window is
idempotent; `clear` removes a step's outputs before it runs, so a failed re-run never leaves an
older run's answer behind.

The journal (`steps.json`) records when each step started and finished: a run that stopped
half-way is concluded `inconclusive`, naming the step that did not finish.

One run of a window at a time is not the folder's business: a run holds its window by a lease
in kafka-recon's store (kafka_recon.stores.lease), which every host sees.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from kafka_recon.errors import ResultError, StepFailed
from kafka_recon.runfiles.base import RunFile
from kafka_recon.runfiles.journal import Journal, StepEntry
from kafka_recon.window import Window, iso_z

# every file and folder a run writes, by the key its model (`RunFile.FILE`) or its writer
# names it with: the one place that spells them
FILES: dict[str, str] = {
    "staged": "staged",              # staged/<tier>.json
    "stage": "stage.json",
    "audit": "audit.json",
    "flight": "flight.json",
    "timings": "timings.json",
    "replays": "replays.json",
    "replay_records": "replays",     # replays/<tier>/r<n>/ (Parquet)
    "aggregates": "reconcile.json",
    "result": "result.json",
    "validation": "validation.json",
    "gx": "gx",                      # the suites' run context and Data Docs
    "report_html": "report.html",
    "report_txt": "report.txt",
    "mail_html": "mail.html",
    "chart": "chart.png",
    "alerts": "alerts.json",
    "journal": "steps.json",
}
# the id files, one folder per kind
ID_KINDS = ("missing", "unexpected", "duplicate", "filtered", "late", "unidentifiable")

# the steps of a run, in order, and what each writes
STEPS: dict[str, tuple[str, ...]] = {
    # the run's timings start with it: a failed re-run never shows the last run's
    "stage": tuple(FILES[k] for k in ("staged", "stage", "audit", "flight", "timings")),
    "replay": tuple(FILES[k] for k in ("replay_records", "replays")),
    "reconcile": (FILES["aggregates"], FILES["result"], *ID_KINDS),
    "validate": (FILES["validation"], FILES["gx"]),
    "report": tuple(FILES[k] for k in ("report_html", "report_txt", "mail_html", "chart")),
    "alert": (FILES["alerts"],),
}
ANALYSIS_STEPS = ("stage", "replay", "reconcile")  # without these there is no result

# what a browser may be given from a run folder: the report, the id files, the Data Docs
SERVED_FILES = (FILES["report_html"], FILES["report_txt"], FILES["chart"])
SERVED_FOLDERS = (*ID_KINDS, f"{FILES['gx']}/uncommitted/data_docs")

F = TypeVar("F", bound=RunFile)


def window_folder_name(window: Window) -> str:
    """`2026-11-20T000000Z_2026-11-21T000000Z`: sortable, and no colon for any file system."""
    return "_".join(window.as_json().values()).replace(":", "")


def write_text(path: Path, text: str) -> None:
    """Whole or not at all: a reader never sees half a file, a re-run replaces it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


@dataclass(frozen=True)
class RunFolder:
    path: Path

    @classmethod
    def of(cls, root: Path, flow: str, window: Window) -> RunFolder:
        return cls(root / flow / window_folder_name(window))

    # ------------------------------------------------------------------ the files
    def file(self, key: str) -> Path:
        """A file (or folder) of the run by its key in FILES."""
        return self.path / FILES[key]

    @property
    def result(self) -> Path:
        return self.file("result")

    @property
    def validation(self) -> Path:
        return self.file("validation")

    @property
    def report(self) -> Path:
        return self.file("report_html")

    @property
    def timings(self) -> Path:
        return self.file("timings")

    @property
    def gx(self) -> Path:
        return self.file("gx")

    def staged(self, tier: str) -> Path:
        return self.file("staged") / f"{tier}.json"

    def replay_dir(self, n: int, tier: str) -> Path:
        return self.file("replay_records") / tier / f"r{n}"

    def ids_file(self, kind: str, name: str) -> Path:
        """An id file: kind is one of ID_KINDS."""
        assert kind in ID_KINDS, kind
        return self.path / kind / f"{name}.csv"

    # ------------------------------------------------------------------ reading and writing
    def _where(self, model: type[RunFile], tier: str | None) -> Path:
        return self.staged(tier or "") if model.FILE == "staged" else self.file(model.FILE)

    def write(self, doc: RunFile, tier: str | None = None) -> Path:
        """A run file, whole (`tier`: which staged/<tier>.json)."""
        path = self._where(type(doc), tier)
        write_text(path, doc.dumps())
        return path

    def read(self, model: type[F], step: str, tier: str | None = None) -> F:
        """A step's output; a missing one names the step that should have written it."""
        path = self._where(model, tier)
        if not path.exists():
            raise StepFailed(step, FileNotFoundError(
                f"{path} is missing: the '{step}' step has not run for this window"))
        return model.load(path)

    def read_if(self, model: type[F], tier: str | None = None) -> F | None:
        """A run file when it was written, else None (an optional step's output)."""
        path = self._where(model, tier)
        return model.load(path) if path.exists() else None

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
                self.write(Journal(steps={k: v for k, v in journal.items()
                                          if k.split(" ")[0] not in steps}))

    # ------------------------------------------------------------------ the journal
    def steps(self) -> dict[str, StepEntry]:
        """The journal's entries; an unreadable journal reads as none (never half a run)."""
        try:
            return Journal.load(self.file("journal")).steps
        except ResultError:
            return {}

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Staging tasks run side by side: their read-modify-writes of the folder's state files
        (the journal) take this lock."""
        self.path.mkdir(parents=True, exist_ok=True)
        with (self.path / ".steps.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def mark(self, step: str, state: str, detail: str | None = None) -> None:
        """state: started, done or failed."""
        with self._guard():
            journal = self.steps()
            journal[step] = StepEntry.model_validate(
                {"state": state, "at": iso_z(datetime.now(UTC)), "detail": detail})
            self.write(Journal(steps=journal))

    def unfinished(self) -> tuple[str, str | None] | None:
        """The first analysis step that did not finish, and what its journal says of it.

        A step may be journalled in parts (`stage orders_db`, one per staging task): a failed
        or unfinished part names the step before its missing end does.
        """
        journal = self.steps()
        for step in ANALYSIS_STEPS:
            parts = {k: v for k, v in journal.items() if k == step or k.startswith(step + " ")}
            for name, entry in parts.items():
                if entry.state == "failed":
                    return name, entry.detail
            for name, entry in parts.items():
                if entry.state == "started":
                    return name, "it started but never finished (killed, or its process died)"
            whole = journal.get(step)
            if whole is None or whole.state != "done":
                return step, ("it never began (its task failed before the step started, or an "
                              "earlier task failed; see the task logs)")
        return None

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
