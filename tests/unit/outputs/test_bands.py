"""The volume a bucket is expected to hold, from the tier's own history: a band that flags a
quiet stretch even when every tier agrees, and never judges a flow without history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kafka_recon.outputs.bands import expected

pytestmark = pytest.mark.unit

HOUR = timedelta(hours=1)
MONDAY = datetime(2026, 11, 30, 14, tzinfo=UTC)


def steady(per_hour: dict[bool, int], days: int = 28) -> dict[datetime, int]:
    """The 14:00 bucket of each past day: `per_hour[weekend]` records, a little noise."""
    out = {}
    for d in range(1, days + 1):
        t = MONDAY - timedelta(days=d)
        out[t] = per_hour[t.weekday() >= 5] + (d % 5) * 10 - 20
    return out


def test_a_bucket_far_below_its_own_history_is_too_few_and_a_usual_one_passes() -> None:
    band = expected(steady({False: 2000, True: 2000}), MONDAY, HOUR)
    assert band is not None and band.references == 28
    assert band.judge(2000) is None and band.judge(1000) == "too few"
    assert band.judge(0) == "too few" and band.judge(4000) == "too many"
    assert band.basis == "the same hour on 28 days"


def test_weekends_are_judged_against_weekends_where_traffic_differs() -> None:
    history = steady({False: 2000, True: 900}, days=35)
    saturday = MONDAY - timedelta(days=2)
    band = expected({t: n for t, n in history.items() if t < saturday}, saturday, HOUR)
    assert band is not None and band.basis.endswith("weekend days")
    assert band.judge(900) is None, "a quiet Saturday is a Saturday"
    monday = expected(history, MONDAY, HOUR)
    assert monday is not None and monday.basis.endswith("weekdays")
    assert monday.judge(900) == "too few"


def test_a_new_flow_has_no_band_until_it_has_a_week_of_history() -> None:
    assert expected(steady({False: 2000, True: 2000}, days=6), MONDAY, HOUR) is None
    assert expected(steady({False: 2000, True: 2000}, days=7), MONDAY, HOUR) is not None


def test_the_default_band_raises_no_alarm_on_four_weeks_of_seasonal_traffic_and_finds_a_drop(
        ) -> None:
    """A smaller run of bench.bands: 2,000 records an hour at peak, one seed."""
    from bench.bands import START, judged, outage, traffic

    history = traffic(2_000, HOUR, seed=2007)
    days = [START + timedelta(days=d) for d in range(28, 56)]
    total, flagged, _, said = judged(history, HOUR, days)
    assert (total, flagged) == (672, 0), said
    weekday = next(d for d in reversed(days) if d.weekday() < 5)
    assert outage(history, weekday, HOUR, 14, 0.5) == (2, 2), "half the traffic gone, 2 hours"
    assert outage(history, weekday, HOUR, 2, 0.0) == (2, 2), "nothing at night, 2 hours"
