"""The volume a bucket is expected to hold, from the tier's own history: a band that flags a
quiet stretch even when every tier agrees, and never judges a flow without history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kafka_recon.config import Flow
from kafka_recon.result.bands import expected

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
    total, flagged, _, said, raised = judged(history, HOUR, days)
    assert (total, flagged, raised) == (672, 0, 0), said
    weekday = next(d for d in reversed(days) if d.weekday() < 5)
    assert outage(history, weekday, HOUR, 14, 0.5) == (2, 2, True), "half the traffic, 2 hours"
    assert outage(history, weekday, HOUR, 2, 0.0) == (2, 2, True), "nothing at night, 2 hours"


def test_a_lone_bucket_just_outside_its_band_is_noise_two_in_a_row_or_a_deep_one_alarm(
        ) -> None:
    from kafka_recon.result.bands import Band, alarms

    band = Band(low=90, high=110, median=100, references=20, basis="", far_low=80,
                far_high=120)
    assert alarms([(100, band), (85, band), (100, band)]) == []          # one, just out
    assert alarms([(100, band), (70, band), (100, band)]) == [[1]]      # one, far out
    assert alarms([(85, band), (85, band), (115, band), (100, None)]) == [[0, 1]]
    assert alarms([(85, band), (85, None), (85, band)]) == []  # unjudged between


def _daily_history(per_hour: int, days: int = 14) -> dict[datetime, int]:
    """Every hour of each past day of the window below: `per_hour` records, a little noise."""
    out = {}
    for d in range(1, days + 1):
        for h in range(24):
            t = DAY - timedelta(days=d) + timedelta(hours=h)
            out[t] = per_hour + ((d * 7 + h) % 5) * 10 - 20
    return out


DAY = datetime(2026, 12, 2, tzinfo=UTC)  # a Wednesday


def _demo(check: str = "warn") -> Flow:
    from tests.factories import flow

    f = flow("demo")
    return f.model_copy(update={"volume": f.volume.model_copy(update={"check": check})})


def test_every_tier_and_bucket_of_the_window_gets_its_band_from_its_own_history() -> None:
    from kafka_recon.outputs.bands import bands_over
    from kafka_recon.window import Window

    f = _demo()
    asked = []

    def history(tier: str, since: datetime, until: datetime) -> dict[datetime, int]:
        asked.append((tier, since, until))
        return _daily_history(500) if tier != "warehouse" else {}

    bands = bands_over(f, Window(DAY, DAY + timedelta(days=1)), history)
    tiers = {b.tier for b in bands.bands}
    assert tiers == {p.name for p in f.points} - {"warehouse"}
    assert len(bands.of("orders_db")) == 24
    b = bands.of("orders_db")[10]
    assert b.bucket == "2026-12-02T10:00:00Z" and b.low < 500 < b.high and b.references == 14
    assert asked[0][1] == DAY - timedelta(days=29) and asked[0][2] == DAY
    # a tier with no history yet is not judged, and says so
    assert bands.notes == ["warehouse: 24 of 24 bucket(s) not judged, not enough history yet "
                           "(a band needs 7 past buckets of the same slot from windows that "
                           "were ok)"]
    assert bands_over(_demo("off"), Window(DAY, DAY + timedelta(days=1)),
                      history).bands == []


def test_a_store_that_does_not_answer_leaves_the_window_unjudged_saying_why() -> None:
    from kafka_recon.errors import StoreUnreachable
    from kafka_recon.outputs.bands import bands_over
    from kafka_recon.window import Window

    def down(tier: str, since: datetime, until: datetime) -> dict[datetime, int]:
        raise StoreUnreachable("kafka-recon's store at pg1:5432 did not answer")

    bands = bands_over(_demo(), Window(DAY, DAY + timedelta(days=1)), down)
    assert bands.bands == [] and "did not answer" in bands.notes[0]


def test_consecutive_buckets_out_of_their_bands_one_way_are_one_finding_said_in_a_sentence(
        ) -> None:
    from kafka_recon.outputs.report import volume_sentence
    from kafka_recon.result.build import _outside
    from kafka_recon.runfiles.bands import BucketBand
    from tests.factories import finding, result

    def band(h: int) -> BucketBand:
        return BucketBand(tier="orders_db", bucket=f"2026-12-02T{h:02d}:00:00Z", low=900,
                          high=1200, median=1000, references=14, basis="the same hour on 14 days")

    counts = {f"2026-12-02T{h:02d}:00:00Z": 1000 for h in range(24)}
    counts |= {"2026-12-02T10:00:00Z": 0, "2026-12-02T11:00:00Z": 0,   # two hours silent
               "2026-12-02T15:00:00Z": 5000,                          # a burst
               "2026-12-02T20:00:00Z": 100}
    runs = _outside([band(h) for h in range(24) if h != 19], counts, timedelta(hours=1))
    assert [(way, [b.bucket[11:13] for b, _ in run]) for way, run in runs] == [
        ("too few", ["10", "11"]), ("too many", ["15"]), ("too few", ["20"])]
    f = finding("volume", "write", "orders_db", 0, buckets=["2026-12-02T10:00:00Z",
                                                              "2026-12-02T11:00:00Z"],
                band=[1800, 2400], direction="too few", why="the same hour on 14 days",
                within_tolerance=True)
    r = result(findings=[f], start=DAY)
    assert r.status == "ok"
    assert volume_sentence(r, f) == (
        "orders: orders_db held 0 records between 10:00 and 12:00; its history expects 1,800 "
        "to 2,400 there (the same hour on 14 days): too few, reported, the window stays ok "
        "(volume check: warn).")
    failing = f.model_copy(update={"within_tolerance": False})
    assert result(findings=[failing], start=DAY).status == "findings"


def test_freshness_without_a_set_lag_is_judged_by_the_lag_the_history_shows(
        ) -> None:
    from kafka_recon.outputs.bands import bands_over
    from kafka_recon.result.build import Inputs, freshness_findings
    from kafka_recon.runfiles.aggregates import Aggregates, TierTally
    from kafka_recon.runfiles.audit import Audit
    from kafka_recon.runfiles.flight import Flight
    from kafka_recon.runfiles.replays import Replays
    from kafka_recon.window import Window

    f = _demo()
    window = Window(DAY, DAY + timedelta(days=1))
    seen = {"orders_db": [3600.0] * 10, "orders_topic": [3600.0] * 3}  # 3: too few windows

    bands = bands_over(f, window, lambda *_: {},
                       lambda tier, since, until: seen.get(tier, []))
    assert bands.usual_lag == {"orders_db": 3600.0}

    def tally(name: str, newest: str) -> TierTally:
        return TierTally(name=name, type="sql", count=10, exact=True, newest=newest)

    x = Inputs(f, window, Aggregates(tiers=[tally("orders_db", "2026-12-02T14:10:00Z"),
                                            tally("orders_topic", "2026-12-02T14:10:00Z")],
                                     hops=[]), Replays(topics=[]), Audit(), Flight(), None)
    [stale] = freshness_findings(x, bands)
    assert stale.hop == "orders_db" and stale.newest == "2026-12-02T14:10:00Z"
    assert stale.within_tolerance and "more than 2h before the window's end (its usual lag" \
        in str(stale.why)
    fresh = Aggregates(tiers=[tally("orders_db", "2026-12-02T22:30:00Z")], hops=[])
    assert freshness_findings(Inputs(f, window, fresh, Replays(topics=[]), Audit(), Flight(),
                                     None), bands) == []
