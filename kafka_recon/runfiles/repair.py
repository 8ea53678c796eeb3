"""`repair/plan.json`: what re-delivering a window's lost records would send, and from where.

A plan is made from a run's result (`kafka-recon repair plan`): for each loss finding, the
records still to be had, written beside the plan by Spark's executors (`repair/<hop>/records/`,
Parquet), and the ids that cannot be had, with the reason (`repair/<hop>/uncovered.csv`). Its
`digest` covers the result it was made from and every file it wrote, so a plan whose run folder
changed since is refused, and a re-delivery can be recorded against the plan it sent.
"""

from __future__ import annotations

from typing import Literal

from kafka_recon.runfiles.base import Part, RunFile, Side

# where a hop's lost records are read back from
Source = Literal["topic", "upstream", "none"]


class RepairHop(Part):
    hop: str
    """The loss finding's hop, `from->to`."""
    side: Side
    """Where along the flow the records were lost."""
    source: Source
    """Where the records are read back from: the hop's topic at their partition and offset
    (a consume-side loss), the upstream's rows by id (a write-side loss), or nowhere."""
    from_tier: str
    """The tier the records are read back from (the hop's upstream tier)."""
    lost: int
    """Ids the finding names (its `missing/<hop>.csv`)."""
    records: int
    """Records the plan holds for re-delivery (a topic may hold an id more than once)."""
    uncovered: int
    """Lost ids the plan cannot re-deliver; `uncovered_file` says why, id by id."""
    records_dir: str | None = None
    """The run-folder path of the records (Parquet): from a topic `id`, `partition`, `offset`,
    `timestamp`, `key`, `value`, `headers`; from an upstream `kafka_recon_id` and the query's
    columns."""
    uncovered_file: str | None = None
    """The run-folder path of the CSV of uncovered ids (`id,reason`)."""
    bytes: int = 0
    """The size of the records' files."""
    sample_ids: list[str] = []
    """Up to ten of the ids planned, first in text order."""
    target: str | None = None
    """The topic a delivery would publish the records to, as the flow was configured when
    planned; null: not published (kept for the owners, or nowhere to send them)."""


class RepairPlan(RunFile):
    FILE = "repair_plan"
    flow: str
    """The flow."""
    window_start: str
    """The window's start (UTC, ISO 8601)."""
    window_end: str
    """The window's end (UTC, ISO 8601)."""
    made_at: str
    """When the plan was made (UTC)."""
    result_digest: str
    """SHA-256 of the `result.json` the plan was made from."""
    hops: list[RepairHop]
    """One entry per loss finding."""
    digest: str
    """SHA-256 over `result_digest` and every file of the plan: names the plan."""


class DeliveredHop(Part):
    hop: str
    """The plan's hop."""
    target: str | None = None
    """The topic its records were published to; null when they were not (a write-side hop:
    its rows stay in the plan's Parquet for the owners)."""
    sent: int = 0
    """Records published by this delivery, in committed transactions."""
    already: int = 0
    """Planned records the target already held from an earlier delivery: not sent again."""
    ids_file: str | None = None
    """The ids this delivery sent (CSV, `id`), in the run folder."""
    note: str | None = None
    """Why a hop was not published."""


class RepairDelivery(RunFile):
    """`repair/delivery.json`: what the last delivery of the window's plan published."""

    FILE = "repair_delivery"
    plan_digest: str
    """The digest of the plan delivered."""
    delivered_at: str
    """When the delivery ended (UTC)."""
    hops: list[DeliveredHop]
    """One entry per hop of the plan."""
