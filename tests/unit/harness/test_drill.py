"""The drill's judge: truth by set arithmetic, comparison down to the id, the command line."""

from __future__ import annotations

from collections import Counter

import pytest

from harness.drill.__main__ import EXIT_USAGE, main
from harness.drill.ledger import Ledger, ids, read
from harness.drill.runner import compare
from harness.drill.truth import Truth, expected_findings

pytestmark = pytest.mark.unit


def test_truth_places_each_kind_on_its_hop_and_side() -> None:
    truth = Truth(upstream=Counter({1: 1, 2: 1, 3: 1, 4: 1}),
                  topic=Counter({1: 1, 2: 2, 3: 1, 99: 1}), late={3},
                  sinks={"sink": Counter({1: 3, 2: 2, 77: 1})})
    got = expected_findings(truth, "db->topic")["sink"]
    assert {k: (v["count"], v["ids"]) for k, v in got.items()} == {
        ("loss", "write", "db->topic"): (1, {4}),
        ("late", "write", "db->topic"): (1, {3}),
        ("unexpected", "write", "db->topic"): (1, {99}),
        ("duplicate", "write", "db->topic"): (1, {2}),       # one extra copy in the topic
        ("loss", "consume", "topic->sink"): (2, {3, 99}),
        ("unexpected", "consume", "topic->sink"): (1, {77}),
        ("duplicate", "consume", "topic->sink"): (2, {1}),   # the sink's copies beyond the topic's
    }


def test_comparison_fails_on_one_wrong_id_even_when_counts_agree() -> None:
    key = ("loss", "write", "db->topic")
    truth = {key: {"count": 2, "ids": {1, 2}}}
    assert compare(truth, {key: {"count": 2, "ids": {1, 2}}}) == []
    assert compare(truth, {key: {"count": 2, "ids": {1, 3}}}) == [
        "loss/write/db->topic: id sets differ (1 reported not in truth, 1 in truth not reported)"]
    assert compare(truth, {}) == ["loss/write/db->topic: 2 in truth, not reported"]
    assert compare({}, {key: {"count": 1, "ids": {5}}}) == [
        "loss/write/db->topic: reported 1, truth has none"]


def test_a_loss_counted_without_its_ids_is_not_a_pass() -> None:
    key = ("loss", "write", "collector.source->collector.sink")
    truth = {key: {"count": 4, "ids": {1, 2, 3, 4}}}
    assert compare(truth, {key: {"count": 4, "ids": None}}) == [
        "loss/write/collector.source->collector.sink: no id file reported"]


def test_a_ledger_line_torn_by_sigkill_is_ignored(tmp_path) -> None:  # type: ignore[no-untyped-def]
    book = Ledger(tmp_path)
    book.write("acked", 1, 0, 10)
    book.write("acked", 2, 0, 11)
    book.close()
    with (tmp_path / "acked.csv").open("a") as fh:
        fh.write("3,0")  # the process died mid-line
    assert [r["id"] for r in read(tmp_path, "acked")] == ["1", "2"]
    assert ids(tmp_path, "processed") == []


def test_an_unknown_scenario_is_refused_with_the_known_ones(capsys: pytest.CaptureFixture[str]
                                                             ) -> None:
    assert main(["--scenario", "S99", "--no-docs"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "unknown scenario(s) S99" in err and "S1, S2" in err


def test_a_subset_of_scenarios_writes_its_matrix_into_its_work_folder_not_the_published_one(
        tmp_path) -> None:  # type: ignore[no-untyped-def]
    import argparse

    from harness.drill.__main__ import drill_docs

    published, out = tmp_path / "docs", tmp_path / "drill-out"

    def where(**given: object) -> object:
        a = argparse.Namespace(**{"scenario": None, "out": out, "docs": None, "no_docs": False,
                                  **given})
        return drill_docs(a, published)

    assert where() == published  # the whole drill
    assert where(scenario=["S2"]) == out
    assert where(scenario=["S2"], docs=tmp_path / "elsewhere") == tmp_path / "elsewhere"
    assert where(docs=tmp_path / "elsewhere") == tmp_path / "elsewhere"
    assert where(no_docs=True) is None
    assert where(scenario=["S2", "S5"], no_docs=True) is None
