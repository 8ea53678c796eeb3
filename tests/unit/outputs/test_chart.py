"""The history chart of the Reconciliation page: one point per window and tier, labelled at the
windows' own scale."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kafka_recon.outputs.chart import history_chart, history_figure
from kafka_recon.window import iso_z

pytestmark = pytest.mark.unit


def _rows(size: timedelta, n: int, tiers: dict[str, int]) -> list[dict[str, Any]]:
    start = datetime(2026, 11, 20, 9, tzinfo=UTC)
    return [{"window_start": iso_z(start + k * size), "window_end": iso_z(start + (k + 1) * size),
             "status": "ok", "missing": 0, "tiers": dict(tiers)} for k in range(n)]


def _labels(fig: Any, ax: Any) -> list[str]:
    fig.canvas.draw()
    return [t.get_text() for t in ax.get_xticklabels() if t.get_text()]


@pytest.mark.parametrize(("size", "shows"), [
    (timedelta(hours=1), ":00"),         # hourly: the hours tell windows apart
    (timedelta(minutes=5), ":05"),       # 5-minute windows: the minutes do
])
def test_a_sub_daily_flows_history_labels_hours_or_minutes_not_one_date_repeated(
        size: timedelta, shows: str) -> None:
    fig, ax = history_figure("f", _rows(size, 3, {"db": 12, "topic": 12}))
    labels = _labels(fig, ax)
    assert len(set(labels)) == len(labels) > 1, labels
    assert any(shows in label for label in labels), labels
    assert not any(label == "2026-11-20" for label in labels), labels


def test_each_window_is_a_point_per_tier_and_zero_is_drawn_as_zero() -> None:
    fig, ax = history_figure("f", _rows(timedelta(hours=1), 3, {"db": 0, "topic": 0}))
    lines = {line.get_label(): list(line.get_ydata()) for line in ax.get_lines()}
    assert lines == {"db": [0, 0, 0], "topic": [0, 0, 0]}
    low, high = ax.get_ylim()
    assert low == 0 < high, "a chart of zeros still has an axis to read them on"


def test_daily_windows_are_labelled_by_date() -> None:
    fig, ax = history_figure("f", _rows(timedelta(days=1), 5, {"db": 100}))
    labels = _labels(fig, ax)
    assert any("Nov" in label or "21" in label for label in labels), labels


def test_the_chart_is_a_png() -> None:
    assert history_chart("f", _rows(timedelta(hours=1), 2, {"db": 3})).startswith(b"\x89PNG")
