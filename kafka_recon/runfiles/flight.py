"""flight.json: what the flight recorder saw of each of the flow's topics around the window
(kafka_recon.cluster.recorder): the causes' evidence of what happened on the cluster."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kafka_recon.runfiles.base import Part, RunFile


class PartitionEvent(Part):
    """A change between two consecutive snapshots of one partition."""
    partition: int
    event: Literal["offline", "leader_change", "leader_bounced", "isr_shrink", "truncation"]
    between: tuple[str, str]                     # the snapshots it happened between
    leader_before: int | None = None             # offline
    leader_after: int | None = None
    from_: int | None = Field(default=None, alias="from")   # leader_change
    to: int | None = None
    clean: bool | None = None                    # the new leader was in the ISR
    isr_before: list[int] | None = None
    isr_after: list[int] | None = None           # isr_shrink
    epochs: list[int | None] | None = None       # leader_change, leader_bounced
    leader: int | None = None                    # leader_bounced
    log_end_before: int | None = None            # truncation
    log_end_after: int | None = None


class Member(Part):
    """A consumer group's member as the snapshots saw it, with what it held and when."""
    member_id: str
    client_id: str
    host: str
    partitions: list[int]
    assignments: list[list[int]] = []   # each distinct assignment it held (older: none kept)
    first_seen: str
    last_seen: str


class Timeline(Part):
    snapshots: int = 0
    first: str | None = None
    last: str | None = None
    largest_gap_s: float | None = None
    covered: bool = False            # snapshots bracket the window with no gap too long
    events: list[PartitionEvent] = []
    members: dict[str, list[Member]] = {}
    # per group: the most offsets retention had deleted below its commit at any snapshot
    deleted_unread: dict[str, int] = {}


class ConnectorEvent(Part):
    """A change the snapshots of a Kafka Connect connector show."""
    event: Literal["not_running", "no_answer", "offsets_reset", "snapshot_again",
                   "offsets_rewound", "offsets_altered"]
    between: tuple[str, str]          # the snapshots it happened between (a spell: its ends)
    state: str | None = None          # not_running: what it was (STOPPED, PAUSED, FAILED, ...)
    partition: int | None = None      # a sink's offsets: the topic partition
    before: int | None = None         # ... its committed offset before
    after: int | None = None          # ... and after


class ConnectorTimeline(Part):
    """What the recorder saw of one connector around the window."""
    name: str
    snapshots: int = 0
    first: str | None = None
    last: str | None = None
    events: list[ConnectorEvent] = []


class Flight(RunFile):
    """flight.json: the flight recorder's timeline of each of the flow's topics, and of each
    Kafka Connect connector it names, around the window."""

    FILE = "flight"
    topics: dict[str, Timeline] = {}   # by topic tier name
    connectors: dict[str, ConnectorTimeline] = {}   # by the tier the connector moves

    def of(self, tier: str) -> Timeline:
        return self.topics.get(tier) or Timeline()
