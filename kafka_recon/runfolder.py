"""The run folder: one per flow and window, `<runs root>/<flow>/<start>_<end>/`.

This module is the one place that knows the name of every file a run writes (`FILES`), which
step writes it, and which of them may be served to a browser. Each JSON file has one model with
a `schema_version` (kafka_recon.runfiles, and the result's kafka_recon.result.model), written
whole by `write` and read back by `read`, which refuses, in one line, a file it cannot read.
Steps read what earlier steps wrote and replace their own output, so re-running a window is
idempotent; `clear` removes a step's outputs before it runs, so a failed re-run never leaves an
older run's answer behind.

The runs root is a local folder or a folder in an object store (`s3://bucket/prefix`): the
folder's path is a `UPath` (fsspec's), a plain `pathlib` path when local. Everything here works
on both: a file is written whole (a local file through a renamed temporary, an object by one
PUT), nothing relies on a lock, a rename or a link.

The journal (`steps/`, an entry per step) records when each step started and finished: a run
that stopped half-way is concluded `inconclusive`, naming the step that did not finish.

One run of a window at a time is not the folder's business: a run holds its window by a lease
in kafka-recon's store (kafka_recon.stores.lease), which every host sees.
"""

from __future__ import annotations

import functools
import os
import posixpath
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ParamSpec, TypeVar
from urllib.parse import quote, unquote

from upath import UPath

from kafka_recon.errors import ReconError, ResultError, StepFailed, StoreUnreachable
from kafka_recon.runfiles.base import RunFile
from kafka_recon.runfiles.journal import StepEntry
from kafka_recon.window import Window, iso_z

# every file and folder a run writes, by the key its model (`RunFile.FILE`) or its writer
# names it with: the one place that spells them
FILES: dict[str, str] = {
    "staged": "staged",              # staged/<tier>.json
    "stage": "stage.json",
    "audit": "audit.json",
    "flight": "flight.json",
    "connectors": "connectors.json",
    "bands": "bands.json",
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
    "journal": "steps",               # steps/<step>.json, an entry per step
    "repair": "repair",               # repair/<hop>/records/ (Parquet), uncovered.csv
    "repair_plan": "repair/plan.json",
    "repair_delivery": "repair/delivery.json",
}
# the id files, one folder per kind
ID_KINDS = ("missing", "unexpected", "duplicate", "filtered", "late", "unidentifiable",
            "dead_lettered")

# the steps of a run, in order, and what each writes
STEPS: dict[str, tuple[str, ...]] = {
    # the run's timings start with it: a failed re-run never shows the last run's
    "stage": tuple(FILES[k] for k in ("staged", "stage", "audit", "flight", "connectors",
                                      "bands", "timings")),
    "replay": tuple(FILES[k] for k in ("replay_records", "replays")),
    # a repair plan stays beside the result a re-run makes: the report then shows the window
    # before (the plan) and after its repair; the plan, made of another result, no longer
    # delivers (its digest covers the result it was made from)
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
P = ParamSpec("P")
R = TypeVar("R")


def window_folder_name(window: Window) -> str:
    """`2026-11-20T000000Z_2026-11-21T000000Z`: sortable, and no colon for any file system."""
    return "_".join(window.as_json().values()).replace(":", "")


def window_of_folder(name: str) -> Window | None:
    """The window a run folder's name says (`window_folder_name` read back), or None."""
    from kafka_recon.errors import WindowError

    parts = name.split("_")
    if len(parts) != 2 or not all(len(p) == 18 and p.endswith("Z") for p in parts):
        return None
    start, end = (f"{p[:13]}:{p[13:15]}:{p[15:]}" for p in parts)
    try:
        return Window.parse(start, end)
    except WindowError:
        return None


def write_bytes(path: Path | UPath, data: bytes) -> None:
    """Whole or not at all: a reader never sees half a file, a re-run replaces it."""
    if not isinstance(path, Path):  # an object is written by one PUT: no half of it to see
        path.write_bytes(data)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def write_text(path: Path | UPath, text: str) -> None:
    write_bytes(path, text.encode())


def remove(path: Path | UPath) -> None:
    """A file, or a folder and all it holds; nothing there is nothing to do."""
    if isinstance(path, Path):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
        return
    # one DELETE per object: S3-compatible stores do not all take S3's multi-object delete
    # (s3proxy refuses its checksum header), and a run folder holds tens of objects, not more
    fs = path.fs
    for key in fs.find(path.path):
        fs.rm_file(key)
    fs.invalidate_cache(path.path)


def put_tree(source: Path, target: Path | UPath) -> None:
    """A local folder's files, each written whole under `target` (made elsewhere, e.g. by a
    library that only writes to a disk)."""
    for file in sorted(p for p in source.rglob("*") if p.is_file()):
        write_bytes(target / file.relative_to(source).as_posix(), file.read_bytes())


def move(source: Path | UPath, target: Path | UPath) -> None:
    """A file to its place: renamed on a disk, copied then deleted in an object store."""
    if isinstance(source, Path) and isinstance(target, Path):
        target.parent.mkdir(parents=True, exist_ok=True)
        source.replace(target)
        return
    assert isinstance(source, UPath) and isinstance(target, UPath)
    source.fs.copy(source.path, target.path)
    source.fs.rm_file(source.path)


def store_of(path: UPath) -> str:
    """An object store's bucket (and endpoint), without credentials: for messages."""
    endpoint = path.storage_options.get("endpoint_url")
    bucket = f"{path.protocol}://{path.path.split('/')[0]}"
    return f"{bucket} ({endpoint})" if endpoint else bucket


def unreachable(path: UPath, exc: BaseException) -> StoreUnreachable:
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return StoreUnreachable(f"the object store at {store_of(path)} did not answer "
                            f"({type(exc).__name__}: {detail})")


def _reached(method: Callable[P, R]) -> Callable[P, R]:
    """An object store's failure (refused, timed out, denied) as a `StoreUnreachable` naming
    it: the run is inconclusive naming the store, never a traceback. A missing file is not
    one."""
    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except (ReconError, FileNotFoundError):
            raise
        except Exception as exc:
            folder: Any = args[0]
            if folder.local:
                raise
            raise unreachable(folder.path, exc) from None
    return wrapper


@dataclass(frozen=True, init=False)
class RunFolder:
    path: UPath
    # the run that holds the window, named in every file written once it is known (`held_by`)
    writer: str | None = field(default=None, compare=False)

    def __init__(self, path: Path | UPath | str) -> None:
        object.__setattr__(self, "path", path if isinstance(path, UPath) else UPath(path))
        object.__setattr__(self, "writer", None)

    def held_by(self, owner: str) -> None:
        """From now on every file written names `owner` as its run (`RunFile.run`): set once
        the run is known to hold the window, so a file another run wrote is told apart."""
        object.__setattr__(self, "writer", owner)

    @classmethod
    def of(cls, root: Path | UPath, flow: str, window: Window) -> RunFolder:
        return cls(root / flow / window_folder_name(window))

    @property
    def local(self) -> bool:
        """On this host's disk (a plain path, or fsspec's local one, which is one too)."""
        return isinstance(self.path, Path)

    # ------------------------------------------------------------------ the files
    def file(self, key: str) -> UPath:
        """A file (or folder) of the run by its key in FILES."""
        return self.path / FILES[key]

    @property
    def result(self) -> UPath:
        return self.file("result")

    def result_digest(self) -> str:
        """SHA-256 of `result.json` as it is now: what a repair plan is made from."""
        import hashlib

        return hashlib.sha256(self.result.read_bytes()).hexdigest()

    @property
    def validation(self) -> UPath:
        return self.file("validation")

    @property
    def report(self) -> UPath:
        return self.file("report_html")

    @property
    def timings(self) -> UPath:
        return self.file("timings")

    @property
    def gx(self) -> UPath:
        return self.file("gx")

    def staged(self, tier: str) -> UPath:
        return self.file("staged") / f"{tier}.json"

    def replay_dir(self, n: int, tier: str) -> UPath:
        return self.file("replay_records") / tier / f"r{n}"

    def ids_file(self, kind: str, name: str) -> UPath:
        """An id file: kind is one of ID_KINDS."""
        assert kind in ID_KINDS, kind
        return self.path / kind / f"{name}.csv"

    def inside(self, named: str) -> UPath:
        """A path a run file names (an id file, the Data Docs), relative to the folder or
        whole, as a path of this folder (with its store's connection)."""
        return self.path / self.relative(named)

    def relative(self, named: str) -> str:
        """`named` relative to the folder (for links inside a report)."""
        root = str(self.path).rstrip("/") + "/"
        if named.startswith(root):
            return named[len(root):]
        if self.local and os.path.isabs(named):
            return os.path.relpath(named, str(self.path))
        return named

    # ------------------------------------------------------------------ reading and writing
    def _where(self, model: type[RunFile], tier: str | None) -> UPath:
        """`tier`: which staged/<tier>.json, or which journal entry."""
        if model.FILE == "staged":
            return self.staged(tier or "")
        if model.FILE == "journal":
            return self._entry(tier or "")
        return self.file(model.FILE)

    @_reached
    def write(self, doc: RunFile, tier: str | None = None) -> UPath:
        """A run file, whole (`tier`: which staged/<tier>.json)."""
        path = self._where(type(doc), tier)
        if self.writer is not None:
            doc = doc.model_copy(update={"run": self.writer})
        write_text(path, doc.dumps())
        return path

    @_reached
    def read(self, model: type[F], step: str, tier: str | None = None) -> F:
        """A step's output; a missing one names the step that should have written it."""
        path = self._where(model, tier)
        if not path.exists():
            raise StepFailed(step, FileNotFoundError(
                f"{path} is missing: the '{step}' step has not run for this window"))
        return model.load(path)

    @_reached
    def read_if(self, model: type[F], tier: str | None = None) -> F | None:
        """A run file when it was written, else None (an optional step's output)."""
        path = self._where(model, tier)
        return model.load(path) if path.exists() else None

    @_reached
    def make(self) -> None:
        """The folder itself, made where it does not exist (an object store's answers here
        first, at a run's begin)."""
        self.path.mkdir(parents=True, exist_ok=True)

    @_reached
    def clear(self, *steps: str) -> None:
        """Remove every output of these steps (and their journal entries) before they run."""
        for step in steps:
            for rel in STEPS[step]:
                remove(self.path / rel)
        for name in self._entries():
            if name.split(" ")[0] in steps:
                remove(self._entry(name))

    # ------------------------------------------------------------------ the journal
    def _entry(self, step: str) -> UPath:
        return self.file("journal") / f"{quote(step, safe='')}.json"

    def _entries(self) -> list[str]:
        folder = self.file("journal")
        try:
            names = [p.name for p in folder.iterdir()] if folder.is_dir() else []
        except FileNotFoundError:
            return []
        return [unquote(n.removesuffix(".json")) for n in names if n.endswith(".json")]

    @_reached
    def steps(self) -> dict[str, StepEntry]:
        """The journal's entries by step; an unreadable entry reads as none (never half a
        run: the step it stood for reads as not finished)."""
        out: dict[str, StepEntry] = {}
        for name in self._entries():
            try:
                entry = StepEntry.load(self._entry(name))
            except ResultError:
                continue
            out[entry.step] = entry
        return out

    def mark(self, step: str, state: str, detail: str | None = None) -> None:
        """state: started, done or failed. Each step writes its own entry: no other step's
        is read or rewritten, so parts journalled at once on two hosts never lose one."""
        self.write(StepEntry.model_validate(
            {"step": step, "state": state, "at": iso_z(datetime.now(UTC)), "detail": detail}),
            step)

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
    @_reached
    def servable(self, rel: str) -> UPath | None:
        """The file a browser asked for, if it is a run artefact inside this folder."""
        inside = posixpath.normpath(rel.replace("\\", "/")).lstrip("/")
        if inside in ("", ".") or inside == ".." or inside.startswith("../") or \
                posixpath.isabs(rel):
            return None
        target = self.path / inside
        if target.is_dir():
            target, inside = target / "index.html", f"{inside}/index.html"
        allowed = inside in SERVED_FILES or any(
            inside.startswith(f"{folder}/") for folder in SERVED_FOLDERS)
        if not allowed or not target.is_file():
            return None
        if self.local:
            # never through a link, even one pointing inside: what is served is what was written
            root = Path(str(self.path)).resolve()
            real = Path(str(target)).resolve()
            if not real.is_relative_to(root) or _has_link(Path(str(self.path)), inside):
                return None
            return UPath(real)
        return target


def _has_link(base: Path, rel: str) -> bool:
    p = base
    for part in Path(rel).parts:
        p = p / part
        if p.is_symlink():
            return True
    return False
