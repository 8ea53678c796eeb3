from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kafka_recon.window import Window, WindowError

pytestmark = pytest.mark.unit


def test_naive_and_zulu_times_are_utc() -> None:
    w = Window.parse("2026-11-20T00:00:00", "2026-11-21T00:00:00Z")
    assert w.start == datetime(2026, 11, 20, tzinfo=UTC)
    assert w.as_json() == {"start": "2026-11-20T00:00:00Z", "end": "2026-11-21T00:00:00Z"}


def test_end_not_after_start_is_an_error() -> None:
    with pytest.raises(WindowError, match="is not after its start"):
        Window.parse("2026-11-21T00:00:00Z", "2026-11-21T00:00:00Z")


def test_unparseable_time_names_the_argument() -> None:
    with pytest.raises(WindowError, match="--start: expected an ISO 8601 time"):
        Window.parse("yesterday", "2026-11-21T00:00:00Z")


def test_window_closes_only_after_grace() -> None:
    w = Window.parse("2026-11-20T00:00:00Z", "2026-11-21T00:00:00Z", timedelta(minutes=10))
    assert not w.is_closed(datetime(2026, 11, 21, 0, 9, 59, tzinfo=UTC))
    assert w.is_closed(datetime(2026, 11, 21, 0, 10, tzinfo=UTC))
