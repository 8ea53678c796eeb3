"""Every tier's band for each bucket of a window, from the flow's own trusted history: what
the run's `volume` findings are judged against (kafka_recon.result.bands makes each band)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from kafka_recon.result.bands import expected

if TYPE_CHECKING:
    from kafka_recon.config import Flow
    from kafka_recon.runfiles.bands import Bands
    from kafka_recon.window import Window


def bands_over(flow: Flow, window: Window, history: Callable[[str, datetime, datetime],
                                                             dict[datetime, int]] | None = None,
               lags: Callable[[str, datetime, datetime], list[float]] | None = None
               ) -> Bands:
    """Every tier's band for each bucket of the window, from the flow's trusted history
    (`history(tier, since, until)`, default the store's: `outputs.history.bucket_history`).
    A store that does not answer leaves the window unjudged, saying so: the volume check
    never makes a run fail by itself."""
    from sqlalchemy.exc import SQLAlchemyError

    from kafka_recon.errors import ReconError, one_line
    from kafka_recon.runfiles.bands import Bands, BucketBand
    from kafka_recon.window import iso_z

    v = flow.volume
    by_history = flow.freshness.check != "off" and flow.freshness.after is None
    if v.check == "off" and not by_history:
        return Bands(check="off")
    if history is None:
        from kafka_recon.outputs import history as store

        def history(tier: str, since: datetime, until: datetime) -> dict[datetime, int]:
            return store.bucket_history(flow.name, tier, since, until)

        def lags(tier: str, since: datetime, until: datetime) -> list[float]:
            return store.usual_lags(flow.name, tier, since, until)

    step = flow.bucket
    buckets, t = [], window.start
    while t < window.end:
        buckets.append(t)
        t += step
    out: list[BucketBand] = []
    notes: list[str] = []
    usual: dict[str, float] = {}
    for point in flow.points:
        try:
            past = history(point.name, window.start - timedelta(days=v.days + 1),
                           window.start)
            seen = lags(point.name, window.start - timedelta(days=v.days + 1),
                        window.start + timedelta(seconds=1)) if lags and by_history else []
        except (ReconError, SQLAlchemyError, OSError) as exc:
            return Bands(check=v.check, notes=[f"the history could not be read, so no "
                                               f"volume was judged: {one_line(exc)}"])
        if len(seen) >= v.references:
            usual[point.name] = max(seen)
        if v.check == "off":
            continue
        unjudged = 0
        for b in buckets:
            band = expected(past, b, step, days=v.days, min_history=v.references,
                            width=v.width)
            if band is None:
                unjudged += 1
                continue
            out.append(BucketBand(tier=point.name, bucket=iso_z(b), low=band.low,
                                  high=band.high, median=band.median,
                                  references=band.references, basis=band.basis,
                                  far_low=band.far_low, far_high=band.far_high))
        if unjudged:
            notes.append(f"{point.name}: {unjudged} of {len(buckets)} bucket(s) not judged, "
                         f"not enough history yet (a band needs {v.references} past buckets "
                         "of the same slot from windows that were ok)")
    return Bands(check=v.check, bands=out, notes=notes, usual_lag=usual)
