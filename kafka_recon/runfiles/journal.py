"""steps.json and .owner.json: the run's journal (when each step started and finished) and
which run holds the window's folder (kafka_recon.runfolder)."""

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


class Owner(RunFile):
    """.owner.json: the run that holds the window's folder, since when, from where."""

    FILE = "owner"
    owner: str
    since: str
    host: str
    pid: int | None = None
    released: bool = False
