"""audit.json: the configuration and health risks the audit found on each topic's cluster and
clients (kafka_recon.cluster.audit): what will be lost next, never the loss verdict itself."""

from __future__ import annotations

from typing import Any, Literal

from kafka_recon.runfiles.base import Part, RunFile, Side


class Risk(Part):
    kind: Literal["config_risk", "health"]
    rule: str
    side: Side
    severity: Literal["high", "medium", "low"]
    seed: str
    topic: str
    where: str
    observed: Any                 # what the rule saw: a setting's value, a partition's ISR
    recommended: Any
    why: str
    fix: str
    blocking: bool                # a health risk that keeps the window from being read whole
    tier: str | None = None       # the topic tier it was found on
    docs: str | None = None       # the documentation the advice comes from (a web address)


class Audit(RunFile):
    """audit.json: the configuration and health risks found on the flow's topics."""

    FILE = "audit"
    LISTED_AS = "risks"  # version 0 was the bare list
    risks: list[Risk] = []

    def of_tier(self, tier: str, default: str) -> list[Risk]:
        """The risks found on one topic tier (`default`: the tier of an untagged risk)."""
        return [r for r in self.risks if (r.tier or default) == tier]
