"""replays.json: each topic's window as the replay step read it, in the flow's order: the
offsets of the window and those read (widened by the disorder margin), what the production
groups had committed, and each replay under its fresh consumer group."""

from __future__ import annotations

from kafka_recon.runfiles.base import Part, RunFile


class OffsetRange(Part):
    """One partition's offsets for the window (kafka_recon.sources.topic.PartitionRange)."""
    partition: int
    start: int
    end: int
    log_start: int
    high_watermark: int
    first_timestamp: int | None = None
    # why the range ends where it does, when not at the first offset stamped after its end: it
    # was carried to the last stable offset (transaction markers, out-of-order timestamps)
    why: str | None = None


class FirstRead(Part):
    read: int
    digest: str | None = None


class ReplayRun(Part):
    group: str
    read: int
    count: int
    distinct: int | None = None
    """The window's distinct ids. None only while the reconcile of the same application has
    yet to count them (the replay leaves them to its grouping by id); a finished run's
    replays.json always holds them."""
    unidentifiable: int
    fingerprint: str | None = None   # the sum of the window's ids' hashes (exact decimal)
    out_of_order: int
    digest: str | None = None        # the sum of the records' digests, when compared
    same_records: bool | None = None  # a later replay: it read the first's very records
    first_read: FirstRead | None = None  # a later replay that read other records at first
    path: str | None = None          # the first replay's records, when kept (Parquet)


class TopicReplays(Part):
    tier: str
    offsets: list[OffsetRange]
    read_offsets: list[OffsetRange]
    disorder_seconds: int
    estimate: int
    committed: dict[str, dict[str, int]]   # group -> partition -> committed offset
    grace_seconds: int
    replays: list[ReplayRun]
    repair_topic: str | None = None
    """The topic's repair topic, when it holds write-side records of this window: they are
    read beside the window's offsets and counted as the topic's own (`repair.counted`)."""
    repaired: int = 0
    """The repair topic's records of this window each replay read."""

    def committed_by_partition(self) -> dict[str, dict[int, int]]:
        return {g: {int(p): off for p, off in offs.items()} for g, offs in self.committed.items()}


class Replays(RunFile):
    """replays.json: each topic's window as the replay step read it, in the flow's order."""

    FILE = "replays"
    topics: list[TopicReplays]

    def of(self, tier: str) -> TopicReplays:
        return next(t for t in self.topics if t.tier == tier)

    def uncounted(self) -> bool:
        """Whether a replay's distinct ids are left for the reconcile to count."""
        return any(r.distinct is None for t in self.topics for r in t.replays)

    def with_distinct(self, by_tier: dict[str, int | None]) -> Replays:
        """These replays with the distinct ids the reconcile counted for each topic (by tier
        name) where a replay left them: the first replay's, and a later one's that read the
        very same records."""
        return self.model_copy(update={"topics": [
            t.model_copy(update={"replays": [
                r if r.distinct is not None else r.model_copy(update={"distinct": by_tier[t.tier]})
                for r in t.replays]})
            for t in self.topics]})
