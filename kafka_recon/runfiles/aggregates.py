"""reconcile.json: what the reconcile step counted (docs/design.md, "Data flow", step 3).

For each point of the flow its count per bucket; for each hop its expected, observed, missing,
unexpected and duplicate records per bucket, where its id files are, and the evidence of a
cause (where the lost or re-delivered records sit). `kafka_recon.result.build` turns these
numbers into the result; no record-level data is here, only counts and the largest runs."""

from __future__ import annotations

from pydantic import Field

from kafka_recon.runfiles.base import Part, RunFile, Side


class PartitionSpan(Part):
    """A topic partition's window records: how many, and the offsets they span."""
    records: int
    first_offset: int
    last_offset: int

    @property
    def gapless(self) -> bool:
        """No offset between the first and the last is missing."""
        return self.records == self.last_offset - self.first_offset + 1


class StreamWriter(Part):
    """A streaming query that committed to a table tier (from the table's commit history)."""
    query_id: str
    first_epoch: int
    last_epoch: int
    first_at: str                 # ISO 8601, UTC
    last_at: str
    commits: int


class TierTally(Part):
    name: str
    type: str                     # the tier's type: sql, kafka, flume, table
    count: int
    distinct: int | None = None   # an id tier
    buckets: dict[str, int] = {}
    exact: bool                   # counted id by id (else from staged counts)
    restarts: int | None = None   # a count-only point: agent restarts inside the window
    unidentifiable: int | None = None   # an id tier: records without a readable id or time
    unidentifiable_file: str | None = None
    unidentifiable_buckets: dict[str, int] = {}
    partitions: dict[str, PartitionSpan] | None = None   # a topic: its window per partition
    late: int | None = None       # a topic: window records that arrived after it closed
    late_file: str | None = None
    late_buckets: dict[str, int] = {}
    newest: str | None = None     # an id tier: its latest event time in the window (ISO)
    newest_arrival: str | None = None  # a topic: the latest Kafka timestamp among them
    as_of: int | None = None      # a table: the Iceberg snapshot or Delta version read
    writers: list[StreamWriter] | None = None  # a Delta table: its streaming writers


class HopBuckets(Part):
    missing: dict[str, int] = {}
    unexpected: dict[str, int] = {}
    duplicate: dict[str, int] = {}
    expected: dict[str, int] = {}
    observed: dict[str, int] = {}
    filtered: dict[str, int] | None = None
    dead_lettered: dict[str, int] | None = None


class OffsetRun(Part):
    """Consecutive window records of one partition (a topic's runs)."""
    partition: int
    first_offset: int
    last_offset: int
    records: int
    first_ts: str | None = None
    last_ts: str | None = None


class Runs(Part):
    """Where marked records sit in a topic: how many runs, records and partitions, and the
    largest runs (at most a few dozen reach the driver)."""
    runs: int = 0
    records: int = 0
    partitions: int = 0
    largest: list[OffsetRun] = []


class UpstreamRun(Part):
    first_id: str
    last_id: str
    records: int
    first_time: str | None = None
    last_time: str | None = None


class Shape(Part):
    """Where lost records sit in the upstream's own order (event time, then id)."""
    runs: int = 0
    records: int = 0
    singles: int = 0
    first_time: str | None = None
    last_time: str | None = None
    largest: list[UpstreamRun] = []


class Stamps(Part):
    """The copies of duplicated ids in a topic: how many ids, how many under one timestamp,
    how many stamped with their event time."""
    ids: int = 0
    same_timestamp: int = 0
    stamped_with_event_time: int = 0


class CounterGap(Part):
    """A Flume counter that missed events it passed on: counted lost, yet arrived later."""
    counted: int
    lost: int
    passed_on_uncounted: dict[str, int]


class AfterGrace(Part):
    """Records lost into a topic that did reach it, after its grace had closed: inside the
    disorder margin the replay reads beyond the close (`OutsideRead`: found further on). A window
    is closed when its grace ends, so they count as lost; this says why."""
    records: int
    closed_at: str                # when the topic's grace closed (the window's end + grace)
    first: str                    # the earliest of their arrivals (Kafka timestamps)
    last: str                     # the latest


class OutsideRead(Part):
    """Records lost into a topic that the loss search found outside the offsets the replay
    read, found by Kafka timestamp from the window's start less the disorder margin to its
    close plus it. Before them: in the topic, stamped earlier than the margin allows (a
    producer's clock behind, a backfill), so not lost. Past them: written after a record
    stamped past the close, whatever their own timestamps say (a transaction committed late, a
    backfill, a clock ahead), so sent late."""
    records: int
    bound: str                    # the time that side's offsets were found by (ISO 8601, UTC)
    first: str                    # the earliest of their own Kafka timestamps
    last: str                     # the latest


class DeadLetterError(Part):
    """Dead-lettered records of one error, from the dead-letter queue's context headers."""
    error: str | None             # the exception's class (null: no context headers)
    message: str | None           # the first line of its message
    records: int


class DeadLetters(Part):
    """A sink connector's dead-letter queue as the run read it for the window."""
    topic: str
    connector: str
    context_headers: bool         # the records carry __connect.errors.* headers
    unidentifiable: int = 0       # records of the window in the queue without a readable id
    unidentifiable_file: str | None = None
    errors: list[DeadLetterError] = []   # the dead-lettered ids' errors, most first


class HopTally(Part):
    from_: str = Field(alias="from")
    to: str
    side: Side
    exact: bool
    expected: int
    observed: int
    missing: int = 0
    unexpected: int = 0
    duplicate: int = 0
    missing_ids: str | None = None
    unexpected_ids: str | None = None
    duplicate_ids: str | None = None
    buckets: HopBuckets
    filtered: int | None = None           # a processor's declared drops
    filtered_ids: str | None = None
    # into a sink connector's tier: missing ids its dead-letter queue holds (not lost)
    dead_lettered: int | None = None
    dead_lettered_ids: str | None = None
    dead_letters: DeadLetters | None = None
    ids_between: list[str] | None = None  # a counted loss named by the id tiers around it
    counter_gap: CounterGap | None = None
    # the evidence of causes (kafka_recon.spark.evidence)
    missing_runs: Runs | None = None
    missing_shape: Shape | None = None
    duplicate_runs: Runs | None = None
    duplicate_stamps: Stamps | None = None
    unexpected_runs: Runs | None = None   # into a topic: where records from nowhere sit
    # into a topic: the lost records that reached it after its grace had closed
    missing_after_grace: AfterGrace | None = None
    # into a topic: the other lost records the loss search found before the offsets replayed
    # (not lost) and past them (sent late)
    missing_before_read: OutsideRead | None = None
    missing_past_read: OutsideRead | None = None
    # into a topic: how many of them have ids between the upstream's lowest and highest (gaps
    # in its sequence, as a transaction rolled back after its rows were published leaves)
    unexpected_inside: int | None = None

    @property
    def name(self) -> str:
        return f"{self.from_}->{self.to}"


class RetentionSplit(Part):
    """When retention cut a topic's window: which of the ids missing from it had been consumed
    (`to` has them) and which never were (`unread`, their ids in `unread_ids`)."""
    topic: str
    from_: str = Field(alias="from")
    to: str
    missing_from_topic: int
    unread: int
    unread_ids: str


class Aggregates(RunFile):
    """reconcile.json: each point's and hop's counts per bucket, where the id files are, and
    the evidence of causes."""

    FILE = "aggregates"
    tiers: list[TierTally]             # every point of the flow, in its order
    hops: list[HopTally]
    retention: list[RetentionSplit] = []

    def tier(self, name: str) -> TierTally | None:
        return next((t for t in self.tiers if t.name == name), None)
