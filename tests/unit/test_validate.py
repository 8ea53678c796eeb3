"""The Great Expectations suites over a result: tolerance per hop, replays, the volume band."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafka_recon.validate import validate_result

pytestmark = pytest.mark.unit


def _result(topic_count: int, missing: int = 0) -> dict[str, Any]:
    return {
        "flow": "clicks", "window": {"start": "2026-11-20T00:00:00Z",
                                     "end": "2026-11-21T00:00:00Z"},
        "tiers": [{"name": "clicks_topic", "count": topic_count},
                  {"name": "lake", "count": topic_count - missing}],
        "hops": [{"from": "clicks_topic", "to": "lake", "expected": topic_count,
                  "observed": topic_count - missing, "missing": missing, "unexpected": 0,
                  "duplicate": 0}],
        "replays": [{"group": "g1", "count": topic_count, "fingerprint": "9"},
                    {"group": "g2", "count": topic_count, "fingerprint": "9"}],
    }


BAND = {"tier": "clicks_topic", "history": [2400, 2500, 2600], "median": 2500, "min": 1750,
        "max": 3250, "note": None}


def test_a_volume_inside_the_band_passes_and_is_reported(tmp_path: Path) -> None:
    summary = validate_result(_result(2450), tmp_path, {"loss": 0, "duplicate": 0}, BAND)
    assert summary["success"] is True
    assert summary["suites"]["recon_volume"]["success"] is True
    assert summary["volume"]["observed"] == 2450
    assert Path(summary["data_docs"]).exists()


def test_fewer_records_than_the_same_weekday_fails_the_volume_suite(tmp_path: Path) -> None:
    summary = validate_result(_result(900), tmp_path, {"loss": 0, "duplicate": 0}, BAND)
    assert summary["success"] is False
    [failed] = summary["suites"]["recon_volume"]["failed"]
    assert failed["expectation"] == "expect_column_values_to_be_between"
    assert (failed["kwargs"]["min_value"], failed["kwargs"]["max_value"]) == (1750, 3250)
    assert summary["suites"]["recon_hops"]["success"] is True


def test_without_enough_history_the_volume_suite_is_not_run_and_says_why(tmp_path: Path) -> None:
    band = {"tier": "clicks_topic", "history": [2400], "min": None, "max": None,
            "note": "volume band not checked: 1 of the 2 same-weekday windows it needs are "
                    "recorded"}
    summary = validate_result(_result(10), tmp_path, {"loss": 0, "duplicate": 0}, band)
    assert "recon_volume" not in summary["suites"] and summary["success"] is True
    assert summary["volume"]["note"].startswith("volume band not checked")


def test_missing_beyond_tolerance_fails_the_hops_suite(tmp_path: Path) -> None:
    summary = validate_result(_result(100, missing=3), tmp_path, {"loss": 2, "duplicate": 0})
    assert summary["suites"]["recon_hops"]["success"] is False
    assert validate_result(_result(100, missing=2), tmp_path / "b",
                           {"loss": 2, "duplicate": 0})["success"] is True
