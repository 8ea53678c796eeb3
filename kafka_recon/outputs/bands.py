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

`expected` is a pure function over counts; `bands_over` gives it the flow's trusted history
(only windows that were ok, judged within tolerance, never one with a volume finding:
`outputs.history.bucket_history`) for every tier and bucket of a window.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafka_recon.config import Flow
    from kafka_recon.runfiles.bands import Bands
    from kafka_recon.window import Window

MAD_TO_SIGMA = 1.4826
WIDTH = 4.0        # standard deviations each way (bench/bands.json: 5 alarms in 104,832)
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
    return Band(low=max(0, math.floor(mid - width * sigma)),
                # Poisson's long upper tail at small counts: a few records of slack
                high=math.ceil(mid + width * sigma + width), median=mid,
                references=len(refs),
                basis=f"the same {_slot_words(step)} on {len(refs)} {kind}")


def bands_over(flow: Flow, window: Window, history: Callable[[str, datetime, datetime],
                                                             dict[datetime, int]] | None = None
               ) -> Bands:
    """Every tier's band for each bucket of the window, from the flow's trusted history
    (`history(tier, since, until)`, default the store's: `outputs.history.bucket_history`).
    A store that does not answer leaves the window unjudged, saying so: the volume check
    never makes a run fail by itself."""
    from kafka_recon.errors import StoreUnreachable, one_line
    from kafka_recon.runfiles.bands import Bands, BucketBand
    from kafka_recon.window import iso_z

    v = flow.volume
    if v.check == "off":
        return Bands(check="off")
    if history is None:
        from kafka_recon.outputs import history as store

        def history(tier: str, since: datetime, until: datetime) -> dict[datetime, int]:
            return store.bucket_history(flow.name, tier, since, until)

    step = flow.bucket
    buckets, t = [], window.start
    while t < window.end:
        buckets.append(t)
        t += step
    out: list[BucketBand] = []
    notes: list[str] = []
    for point in flow.points:
        try:
            past = history(point.name, window.start - timedelta(days=v.days + 1),
                           window.start)
        except (StoreUnreachable, OSError) as exc:
            return Bands(check=v.check, notes=[f"the history could not be read, so no "
                                               f"volume was judged: {one_line(exc)}"])
        unjudged = 0
        for b in buckets:
            band = expected(past, b, step, days=v.days, min_history=v.references,
                            width=v.width)
            if band is None:
                unjudged += 1
                continue
            out.append(BucketBand(tier=point.name, bucket=iso_z(b), low=band.low,
                                  high=band.high, median=band.median,
                                  references=band.references, basis=band.basis))
        if unjudged:
            notes.append(f"{point.name}: {unjudged} of {len(buckets)} bucket(s) not judged, "
                         f"not enough history yet (a band needs {v.references} past buckets "
                         "of the same slot from windows that were ok)")
    return Bands(check=v.check, bands=out, notes=notes)
