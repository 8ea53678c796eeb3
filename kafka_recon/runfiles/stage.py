"""stage.json and staged/<tier>.json: what the staging step counted of each SQL and Flume tier.

A SQL tier with an id query stages its count and distinct ids (its ids are read by Spark in the
reconcile step); one with a counts query, its count per bucket. A Flume tier stages two
count-only points, its source and its sink, with the agent restarts its counters showed and the
reasons a window could not be counted."""

from __future__ import annotations

from typing import Literal

from kafka_recon.runfiles.base import Part, RunFile


class StagedPoint(Part):
    name: str
    kind: Literal["ids", "counts"]
    count: int
    distinct: int | None = None           # an id tier
    buckets: dict[str, int] = {}          # a count-only point: records per bucket start
    restarts: int = 0                     # a Flume point: agent restarts inside the window
    reasons: list[str] = []               # why the point could not be counted whole


class _Points(RunFile):
    LISTED_AS = "points"  # version 0 was the bare list
    points: list[StagedPoint]

    @property
    def reasons(self) -> list[str]:
        return [r for p in self.points for r in p.reasons]


class StagedTier(_Points):
    """staged/<tier>.json: one tier's points, written by its own staging task."""
    FILE = "staged"


class Stage(_Points):
    """stage.json: every staged point of the flow, in the flow's order."""
    FILE = "stage"

    def point(self, name: str) -> StagedPoint:
        return next(p for p in self.points if p.name == name)
