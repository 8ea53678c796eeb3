"""steps/<step>.json: the run's journal, one file per step (or per staging task's part of a
step), saying when it started and how it ended (kafka_recon.runfolder).

One file per entry, never one file that each step reads, changes and writes back: staging tasks
run side by side on any host, and an object store has no lock to serialise them; each writes
its own entry whole. Which run holds the window is the store's (kafka_recon.stores.lease)."""

from __future__ import annotations

from typing import Any, Literal

from kafka_recon.runfiles.base import RunFile


class StepEntry(RunFile):
    """steps/<step>.json: one step's (or one staging task's) state."""

    FILE = "journal"
    SCHEMA_VERSION = 3
    RUN_SINCE = 3
    schema_version: int = 3
    step: str
    """The step: `stage`, `stage <tier>` (one staging task's part), `replay`, ..."""
    state: Literal["started", "done", "failed"]
    at: str
    detail: str | None = None

    @classmethod
    def upgrade(cls, data: Any, version: int) -> Any:
        # version 1 was one steps.json holding every step: never read as one entry
        if version == 1:
            raise ValueError("written as one steps.json by kafka-recon before journal entries "
                             "were one file each")
        return super().upgrade(data, version)
