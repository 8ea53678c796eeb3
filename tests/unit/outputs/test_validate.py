"""The Great Expectations suites over a result: tolerance per hop, replays, the volume band."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_recon.config import Tolerance
from kafka_recon.result.model import Result
from kafka_recon.runfolder import RunFolder
from tests.factories import hop, replay, result, tier
from tests.factories import validate_from_json as validate_result

pytestmark = pytest.mark.unit



def _result(topic_count: int, missing: int = 0) -> Result:
    return result("clicks",
                  tiers=[tier("clicks_topic", topic_count), tier("lake", topic_count - missing)],
                  hops=[hop("clicks_topic", "lake", "consume", topic_count,
                            topic_count - missing, missing=missing)],
                  replays=[replay("g1", topic_count, "9"), replay("g2", topic_count, "9")])


BAND = {"tier": "clicks_topic", "history": [2400, 2500, 2600], "median": 2500, "min": 1750,
        "max": 3250, "note": None}


def test_a_volume_inside_the_band_passes_and_is_reported(tmp_path: Path) -> None:
    summary = validate_result(_result(2450), RunFolder(tmp_path), Tolerance(), BAND)
    assert summary["success"] is True
    assert summary["suites"]["recon_volume"]["success"] is True
    assert summary["volume"]["observed"] == 2450
    assert Path(summary["data_docs"]).exists()


def test_fewer_records_than_the_same_weekday_fails_the_volume_suite(tmp_path: Path) -> None:
    summary = validate_result(_result(900), RunFolder(tmp_path), Tolerance(), BAND)
    assert summary["success"] is False
    [failed] = summary["suites"]["recon_volume"]["failed"]
    assert failed["expectation"] == "expect_column_values_to_be_between"
    assert (failed["kwargs"]["min_value"], failed["kwargs"]["max_value"]) == (1750, 3250)
    assert summary["suites"]["recon_hops"]["success"] is True


def test_without_enough_history_the_volume_suite_is_not_run_and_says_why(tmp_path: Path) -> None:
    band = {"tier": "clicks_topic", "history": [2400], "min": None, "max": None,
            "note": "volume band not checked: 1 of the 2 same-weekday windows it needs are "
                    "recorded"}
    summary = validate_result(_result(10), RunFolder(tmp_path), Tolerance(), band)
    assert "recon_volume" not in summary["suites"] and summary["success"] is True
    assert summary["volume"]["note"].startswith("volume band not checked")


def test_missing_beyond_tolerance_fails_the_hops_suite(tmp_path: Path) -> None:
    summary = validate_result(_result(100, missing=3), RunFolder(tmp_path), Tolerance(loss=2))
    assert summary["suites"]["recon_hops"]["success"] is False
    assert validate_result(_result(100, missing=2), RunFolder(tmp_path / "b"),
                           Tolerance(loss=2))["success"] is True


def test_a_percentage_tolerance_allows_that_share_of_the_hops_expected_records(
        tmp_path: Path) -> None:
    # 0.1% of 2,000 expected records is 2: two missing pass, three fail
    assert validate_result(_result(2000, missing=2), RunFolder(tmp_path / "a"),
                           Tolerance(loss="0.1%"))["success"] is True
    failed = validate_result(_result(2000, missing=3), RunFolder(tmp_path / "b"),
                             Tolerance(loss="0.1%"))
    assert failed["suites"]["recon_hops"]["success"] is False
    [check] = failed["suites"]["recon_hops"]["failed"]
    assert check["kwargs"]["column_A"] == "allowed_missing"


def test_unexpected_records_beyond_their_tolerance_fail_the_hops_suite(tmp_path: Path) -> None:
    res = result("clicks", tiers=[tier("clicks_topic", 100), tier("lake", 104)],
                 hops=[hop("clicks_topic", "lake", "consume", 100, 104, unexpected=4)],
                 replays=[replay("g1", 100, "9"), replay("g2", 100, "9")])
    failed = validate_result(res, RunFolder(tmp_path / "a"), Tolerance())
    assert [c["kwargs"]["column_A"] for c in failed["suites"]["recon_hops"]["failed"]] == [
        "allowed_unexpected"]
    assert validate_result(res, RunFolder(tmp_path / "b"),
                           Tolerance(unexpected=4))["success"] is True
