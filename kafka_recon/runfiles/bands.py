"""bands.json: the volume each tier's buckets are expected to hold, from the flow's own history
(kafka_recon.outputs.bands), read when the run stages its window: what `volume` findings are
judged against."""

from __future__ import annotations

from typing import Literal

from kafka_recon.runfiles.base import Part, RunFile


class BucketBand(Part):
    tier: str
    """The counting point."""
    bucket: str
    """The bucket's start, ISO 8601 UTC."""
    low: int
    """The fewest records the bucket is expected to hold."""
    high: int
    """The most."""
    median: float
    """The references' median."""
    references: int
    """How many past buckets of the same slot it was built from."""
    basis: str
    """The references in words: "the same hour on 27 days"."""
    far_low: int = 0
    """What a bucket alone must fall below to be a finding (a run of two needs only `low`)."""
    far_high: int = 0
    """What a bucket alone must rise above to be a finding."""


class Bands(RunFile):
    """bands.json: every tier's expected band per bucket of the window, and why a tier or
    bucket has none."""
    FILE = "bands"
    check: Literal["off", "warn", "fail"] = "warn"
    """What a bucket outside its band does (the flow's `volume.check`)."""
    bands: list[BucketBand] = []
    notes: list[str] = []
    """Why some buckets have no band ("not enough history yet", the history unreadable)."""
    usual_lag: dict[str, float] = {}
    """By tier: the most seconds before a trusted window's end its last bucket with records
    began (how fresh the tier usually is); what `freshness` judges by when `after` is not
    set. A tier with fewer trusted windows than `volume.references` has none."""

    def of(self, tier: str) -> list[BucketBand]:
        return [b for b in self.bands if b.tier == tier]
