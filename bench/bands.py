"""How often the default volume band (kafka_recon.outputs.bands) flags a normal bucket, and
how soon it finds a real drop, on synthetic traffic shaped like a business's: a day/night
curve, weekends at about half the weekdays, every day a little busier or quieter than the last
(lognormal, 6%), every bucket noisy (lognormal 5%, then Poisson).

    python -m bench.bands [--seeds 7,11,23,5]

For each flow size (peak records per hour) and bucket (1 hour, 5 minutes): 56 days of history,
the last 28 days judged bucket by bucket against the days before each; then the same last day
with half its traffic gone for two hours in the afternoon, and with nothing at all for two
hours at night. Writes bench/bands.json.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("bands.json")
START = datetime(2026, 9, 1, tzinfo=UTC)
DAYS, JUDGED = 56, 28


def traffic(peak: int, step: timedelta, seed: int) -> dict[datetime, int]:
    """Bucket start -> records, for DAYS days from START."""
    import numpy as np

    rng = np.random.default_rng(seed)
    per_hour = step / timedelta(hours=1)
    out: dict[datetime, int] = {}
    for d in range(DAYS):
        day = START + timedelta(days=d)
        level = rng.lognormal(0, 0.06) * (0.55 if day.weekday() >= 5 else 1.0)
        t = day
        while t < day + timedelta(days=1):
            hour = t.hour + t.minute / 60
            # quiet at 04:00, busiest at 14:00
            shape = 0.15 + 0.85 * (0.5 - 0.5 * math.cos(2 * math.pi * (hour - 4) / 24))
            rate = peak * per_hour * shape * level * rng.lognormal(0, 0.05)
            out[t] = int(rng.poisson(rate))
            t += step
    return out


def judged(history: dict[datetime, int], step: timedelta, days: list[datetime]
           ) -> tuple[int, int, int, list[str], int]:
    """(buckets judged, out of their bands, without a band, what was out, alarms) over
    `days`: an alarm is what a run reports (`result.bands.alarms`: two buckets in a row out
    one way, or one beyond its far band), a day at a time as a daily window sees it."""
    from kafka_recon.result.bands import alarms, expected

    total = flagged = unjudged = raised = 0
    said = []
    for day in days:
        t, slots = day, []
        while t < day + timedelta(days=1):
            band = expected(history, t, step)
            slots.append((history[t], band))
            total += 1
            if band is None:
                unjudged += 1
            elif band.judge(history[t]):
                flagged += 1
                said.append(f"{t:%Y-%m-%d %H:%M} {history[t]} not in {band.low}-{band.high}")
            t += step
        raised += len(alarms(slots))
    return total, flagged, unjudged, said, raised


def outage(history: dict[datetime, int], day: datetime, step: timedelta, start_hour: int,
           keep: float) -> tuple[int, int, bool]:
    """The day with `keep` of its traffic for two hours from `start_hour`: (buckets in the
    outage, of them out of their bands, whether the day's window raises an alarm in it)."""
    from kafka_recon.result.bands import alarms, expected

    hit = dict(history)
    lo, hi = day + timedelta(hours=start_hour), day + timedelta(hours=start_hour + 2)
    t = lo
    while t < hi:
        hit[t] = int(history[t] * keep)
        t += step
    inside = caught = 0
    slots, starts = [], []
    t = day
    while t < day + timedelta(days=1):
        band = expected(hit, t, step)
        slots.append((hit[t], band))
        starts.append(t)
        if lo <= t < hi:
            inside += 1
            caught += bool(band and band.judge(hit[t]) == "too few")
        t += step
    found = any(lo <= starts[i] < hi for run in alarms(slots) for i in run)
    return inside, caught, found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.bands",
                                description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="7,11,23,5",
                   help="one synthetic history per seed (comma-separated)")
    a = p.parse_args(argv)
    days = [START + timedelta(days=d) for d in range(DAYS - JUDGED, DAYS)]
    last = days[-1] if days[-1].weekday() < 5 else days[-3]
    rows: list[dict[str, Any]] = []
    for seed in (int(x) for x in a.seeds.split(",")):
        for step in (timedelta(hours=1), timedelta(minutes=5)):
            for peak in (60, 2_000, 100_000):
                history = traffic(peak, step, seed + peak)
                total, flagged, unjudged, said, raised = judged(history, step, days)
                half = outage(history, last, step, 14, 0.5)
                night = outage(history, last, step, 2, 0.0)
                rows.append({"seed": seed, "bucket_minutes": int(step.total_seconds() // 60),
                             "peak_per_hour": peak, "normal_buckets": total,
                             "out_of_band": flagged, "false_alarms": raised,
                             "without_band": unjudged, "flagged": said[:20],
                             "half_stop_14_16": {"buckets": half[0], "flagged": half[1],
                                                 "alarm": half[2]},
                             "night_stop_02_04": {"buckets": night[0], "flagged": night[1],
                                                  "alarm": night[2]}})
                print(json.dumps({k: v for k, v in rows[-1].items() if k != "flagged"}),
                      flush=True)
    normal = sum(r["normal_buckets"] for r in rows)
    alarms = sum(r["false_alarms"] for r in rows)
    outside = sum(r["out_of_band"] for r in rows)
    OUT.write_text(json.dumps({"seeds": a.seeds, "days": DAYS, "judged_days": JUDGED,
                               "normal_buckets": normal, "out_of_band": outside,
                               "false_alarms": alarms, "results": rows}, indent=2) + "\n")
    print(f"{alarms} false alarm(s) ({outside} bucket(s) out of band) in {normal} normal "
          "buckets")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
