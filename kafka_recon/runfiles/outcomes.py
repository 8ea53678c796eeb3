"""The files of the steps after the result: validation.json (the Great Expectations suites),
alerts.json (what each Slack or PagerDuty alert did) and timings.json (where a run's time
went)."""

from __future__ import annotations

from typing import Any, Literal

from kafka_recon.runfiles.base import Part, RunFile


class FailedExpectation(Part):
    expectation: str
    kwargs: dict[str, Any]
    observed: Any = None
    words: str | None = None
    """What failed, in words an owner reads: the hop or tier, what was seen, what was allowed."""

    @property
    def said(self) -> str:
        """The failure as the report says it (an older file's without words: its type, and what
        it observed when it says)."""
        if self.words:
            return self.words
        column = self.kwargs.get("column") or " and ".join(
            str(self.kwargs[k]) for k in ("column_A", "column_B") if k in self.kwargs)
        return (f"{self.expectation}{f' on {column}' if column else ''}"
                + (f" (observed {self.observed})" if self.observed is not None else ""))


class SuiteOutcome(Part):
    success: bool
    failed: list[FailedExpectation] = []


class Volume(Part):
    """The band a flow with no upstream count expects its volume in, from its history."""
    tier: str
    history: list[int] = []
    median: float | None = None
    min: int | None = None
    max: int | None = None
    note: str | None = None
    observed: int | None = None


class Validation(RunFile):
    """validation.json: each Great Expectations suite's outcome over the result, where the
    Data Docs are, and the volume band checked."""

    FILE = "validation"
    success: bool
    suites: dict[str, SuiteOutcome]
    data_docs: str | None = None
    volume: Volume | None = None


class AlertOutcome(Part):
    type: Literal["slack", "pagerduty"]
    conn: str
    event: str | None
    sent: bool
    why: str | None = None
    error: str | None = None


class Alerts(RunFile):
    """alerts.json: what each Slack or PagerDuty alert of the flow did for the window."""

    FILE = "alerts"
    LISTED_AS = "alerts"  # version 0 was the bare list
    alerts: list[AlertOutcome] = []

    @property
    def failed(self) -> list[str]:
        return [f"{a.type} ({a.conn}): {a.error}" for a in self.alerts if a.error]


class Timings(RunFile):
    """timings.json: seconds per step, and the Spark jobs each ran (absent through Spark
    Connect, which tells its sessions nothing of jobs)."""

    FILE = "timings"
    laps: dict[str, float] = {}
    spark_jobs: dict[str, int] | None = None

    @classmethod
    def upgrade(cls, data: Any, version: int) -> Any:
        if version == 0 and isinstance(data, dict):  # version 0 kept the laps at the top
            jobs = data.get("spark_jobs")
            return {"laps": {k: v for k, v in data.items() if k != "spark_jobs"},
                    **({"spark_jobs": jobs} if jobs is not None else {})}
        return super().upgrade(data, version)
