"""steps.json: the run's journal, when each step started and finished (kafka_recon.runfolder).
Which run holds the window is the store's (kafka_recon.stores.lease), not a file's."""

from __future__ import annotations

from typing import Any, Literal

from kafka_recon.runfiles.base import Part, RunFile


class StepEntry(Part):
    state: Literal["started", "done", "failed"]
    at: str
    detail: str | None = None


class Journal(RunFile):
    """steps.json: when each step of the run started and how it ended."""

    FILE = "journal"
    steps: dict[str, StepEntry] = {}   # "stage", "stage <tier>", "replay", ...

    @classmethod
    def upgrade(cls, data: Any, version: int) -> Any:
        if version == 0 and isinstance(data, dict):  # version 0 was the steps alone
            return {"steps": data}
        return super().upgrade(data, version)
