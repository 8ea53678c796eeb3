"""The volume a tier's bucket is expected to hold, from the tier's own history: the first part
of judging a quiet upstream (issue 64), where every tier may agree and still be wrong.

For a bucket, the references are the same slot of the day (the same hour, or the same five
minutes) on each of the trailing days the history holds. Where the flow's traffic differs
between weekdays and weekends (their medians more than a quarter apart), only the days of the
bucket's own kind count. The band is the references' median, widened each way by `width`
standard deviations of two noises together: the day-to-day spread (the median absolute
deviation, scaled by 1.4826, and never less than `REL_FLOOR` of the median: a few references
estimate it roughly) and the count's own Poisson noise (its square root), so that neither a
very regular flow nor a small one is judged too tightly. A bucket with fewer references than
`min_history` has no band: a new flow is "not enough history yet", never an alarm.

Pure functions over counts: `expected` makes a bucket's band, `alarms` says which buckets out
of their bands are worth a finding. `kafka_recon.outputs.bands.bands_over` gives them the
flow's trusted history (only windows that were ok, never one with a volume finding).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

MAD_TO_SIGMA = 1.4826
WIDTH = 4.0        # standard deviations each way
FAR = 1.5          # a single bucket alarms only beyond FAR times the band (`alarms`)
DAYS = 28          # trailing days the references come from
MIN_HISTORY = 7    # references a band needs
WEEKLY = 0.25      # weekday and weekend medians this far apart: judged apart
REL_FLOOR = 0.08   # the spread is never taken as less than this share of the median


@dataclass(frozen=True)
class Band:
    low: int
    high: int
    median: float
    references: int   # how many past buckets it was built from
    basis: str        # "the same hour on 27 days", "... on 20 weekdays"
    far_low: int = 0  # FAR times as wide: what one bucket alone must leave to alarm
    far_high: int = 0

    def judge(self, observed: int) -> str | None:
        """'too few', 'too many' or None (inside the band)."""
        if observed < self.low:
            return "too few"
        if observed > self.high:
            return "too many"
        return None


def _weekend(t: datetime) -> bool:
    return t.weekday() >= 5


def _slot_words(step: timedelta) -> str:
    minutes = int(step.total_seconds() // 60)
    return "hour" if minutes == 60 else "day" if minutes == 1440 else f"{minutes} minutes"


def expected(history: dict[datetime, int], bucket: datetime, step: timedelta, *,
             days: int = DAYS, min_history: int = MIN_HISTORY, width: float = WIDTH
             ) -> Band | None:
    """The band for `bucket` (a bucket start, aware UTC) from `history` (bucket start ->
    records, any span), or None with fewer than `min_history` references."""
    refs = [(t, history[t]) for t in (bucket - timedelta(days=d) for d in range(1, days + 1))
            if t in history]
    kind = "days"
    weekday = [n for t, n in refs if not _weekend(t)]
    weekend = [n for t, n in refs if _weekend(t)]
    if weekday and weekend:
        a, b = statistics.median(weekday), statistics.median(weekend)
        if abs(a - b) > WEEKLY * max(a, b, 1):
            refs = [(t, n) for t, n in refs if _weekend(t) == _weekend(bucket)]
            kind = "weekend days" if _weekend(bucket) else "weekdays"
    if len(refs) < min_history:
        return None
    counts = [n for _, n in refs]
    mid = statistics.median(counts)
    mad = statistics.median(abs(n - mid) for n in counts)
    # a few references estimate the spread roughly: never tighter than REL_FLOOR of the
    # median, and the count's own Poisson noise on top (a small count is mostly that noise)
    spread = max(MAD_TO_SIGMA * mad, REL_FLOOR * mid)
    sigma = math.sqrt(spread ** 2 + mid)
    far = width * FAR
    return Band(low=max(0, math.floor(mid - width * sigma)),
                # Poisson's long upper tail at small counts: a few records of slack
                high=math.ceil(mid + width * sigma + width), median=mid,
                references=len(refs),
                basis=f"the same {_slot_words(step)} on {len(refs)} {kind}",
                far_low=max(0, math.floor(mid - far * sigma)),
                far_high=math.ceil(mid + far * sigma + far))


class Bounds(Protocol):
    """A band as `alarms` reads it (a `Band`, or bands.json's `BucketBand`)."""
    @property
    def low(self) -> int: ...
    @property
    def high(self) -> int: ...
    @property
    def far_low(self) -> int: ...
    @property
    def far_high(self) -> int: ...


def alarms(judged: Sequence[tuple[int, Bounds | None]]) -> list[list[int]]:
    """The alarms among consecutive buckets (count, band; None: not judged), as lists of their
    positions: a run of two or more buckets out of their bands the same way, or one bucket
    beyond FAR times its band. A lone bucket just outside its band is noise a day of traffic
    shows now and then (bench/bands.json); a real outage lasts, or is deep."""
    runs: list[tuple[str, list[int]]] = []
    for i, (n, band) in enumerate(judged):
        way = None if band is None else "too few" if n < band.low else \
            "too many" if n > band.high else None
        if way is None:
            continue
        if runs and runs[-1][0] == way and runs[-1][1][-1] == i - 1:
            runs[-1][1].append(i)
        else:
            runs.append((way, [i]))

    def far(i: int) -> bool:
        n, band = judged[i]
        return band is not None and (n < band.far_low or n > band.far_high)

    return [run for _, run in runs if len(run) >= 2 or far(run[0])]
