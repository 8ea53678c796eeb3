"""What one run reconciles, as templates rendered when each task runs (the daily DAG's data
interval, the ad-hoc DAG's trigger form), or literals."""

from __future__ import annotations

import json
from dataclasses import dataclass

from kafka_recon.airflow.names import ADHOC_POOL


@dataclass(frozen=True)
class RunArgs:
    """Templates (or literals) for what one run reconciles."""
    flow: str
    start: str
    end: str
    config: str
    replays: str | None = None  # None: the flow's own replay count
    email: str = "True"
    pool: str = ADHOC_POOL  # the Airflow pool the replay waits in (names.replay_pool)

    @property
    def flow_expr(self) -> str:
        """The flow as a Jinja expression (inside another template's braces)."""
        return _expr(self.flow)

    @property
    def end_expr(self) -> str:
        return _expr(self.end)


def _expr(template: str) -> str:
    """`{{ x }}` as the expression x; a literal as a quoted string."""
    inner = template.strip()
    if inner.startswith("{{") and inner.endswith("}}"):
        return "(" + inner[2:-2].strip() + ")"
    return json.dumps(template)
