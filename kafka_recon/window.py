"""The window being reconciled: [start, end), plus the grace in which records may arrive late."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from kafka_recon.errors import WindowError

if TYPE_CHECKING:  # Spark's types only: the window is imported where Spark is not
    from pyspark.sql import Column


def parse_instant(text: str, what: str) -> datetime:
    """ISO 8601 to an aware UTC datetime; a naive time is read as UTC."""
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise WindowError(f"{what}: expected an ISO 8601 time such as "
                          f"2026-11-20T00:00:00Z, got {text!r}") from exc
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# Windows lie between these and last at most MAX_LENGTH: Kafka timestamps, Spark and the
# databases all hold such times, and a typo such as 9999-12-31 is refused, not crashed on.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2100, 1, 1, tzinfo=UTC)
MAX_LENGTH = timedelta(days=366)


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime
    grace: timedelta = timedelta(0)

    def __post_init__(self) -> None:
        if self.start.tzinfo is None or self.end.tzinfo is None:
            raise WindowError("window start and end must carry a time zone")
        if self.end <= self.start:
            raise WindowError(f"window end {self.end.isoformat()} is not after its start "
                              f"{self.start.isoformat()}")
        for name, t in (("start", self.start), ("end", self.end)):
            if not EARLIEST <= t <= LATEST:
                raise WindowError(f"window {name} {t.isoformat()} is outside "
                                  f"{iso_z(EARLIEST)}..{iso_z(LATEST)}")
        if self.end - self.start > MAX_LENGTH:
            raise WindowError(f"window {iso_z(self.start)}..{iso_z(self.end)} is longer than "
                              f"{MAX_LENGTH.days} days: reconcile it in shorter windows")

    @classmethod
    def parse(cls, start: str, end: str, grace: timedelta = timedelta(0)) -> Window:
        return cls(parse_instant(start, "--start"), parse_instant(end, "--end"), grace)

    @property
    def closes_at(self) -> datetime:
        """When the last late record may have arrived: end plus grace."""
        return self.end + self.grace

    def is_closed(self, now: datetime | None = None) -> bool:
        return (now or datetime.now(UTC)) >= self.closes_at

    @staticmethod
    def millis(t: datetime) -> int:
        return int(t.timestamp() * 1000)

    def as_json(self) -> dict[str, str]:
        return {"start": iso_z(self.start), "end": iso_z(self.end)}

    def sql_params(self) -> dict[str, datetime]:
        """Naive UTC bounds: what SQLite text columns and PostgreSQL timestamps both compare."""
        return {"start": self.start.replace(tzinfo=None), "end": self.end.replace(tzinfo=None)}


# Instants cross between Spark and Python as numbers: PySpark, classic and Connect alike, turns
# a timestamp it hands to Python into a naive datetime in the Python process's local zone,
# whatever the JVM's (on a host on Shanghai time every bucket was labelled 8 hours late). A
# timestamp leaves Spark as `micros(column)` and comes back as `from_micros(number)`.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def micros(col: Column | str) -> Column:
    """A Spark timestamp column as microseconds since the epoch, to be collected."""
    from pyspark.sql import functions as F

    return F.unix_micros(F.col(col) if isinstance(col, str) else col)


def from_micros(value: int) -> datetime:
    """An instant collected from Spark as `micros`, as an aware UTC datetime."""
    return EPOCH + timedelta(microseconds=int(value))


def iso_z(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_us(t: datetime) -> str:
    """To the microsecond: snapshots taken seconds apart keep their order, and a snapshot is
    never stored as earlier than it was taken (the snapshot store's `taken_at`)."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
