"""Every line of a report means something for the flow it is about: a plain SQL and Kafka flow
with an audit and a failed validation, a table tier read at a version, a Flume agent's tiers
and a flow through several topics, each rendered whole (text, HTML, mail)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_recon.config import Tolerance
from kafka_recon.outputs.report import render_report
from kafka_recon.outputs.validate import validate_result
from kafka_recon.result.model import Finding, Result
from kafka_recon.runfolder import RunFolder
from tests.factories import finding, hop, hours, replay, result, tier
from tests.report_lines import meaningless, report_lines

pytestmark = pytest.mark.unit

BUCKET = [{"bucket": hours()[3], "expected": 10, "observed": 7, "missing": 3}]
RISK = Finding.model_validate({
    "kind": "config_risk", "rule": "T1-replication", "side": "write", "severity": "high",
    "seed": "000,002", "docs": "https://kafka.apache.org/documentation/#replication",
    "topic": "orders", "where": "", "observed": "replication.factor=1",
    "recommended": "replication.factor=3", "why": "Fewer than three replicas ...",
    "fix": "Recreate the topic with replication factor 3.", "blocking": False,
    "hop": "orders_topic", "count": 1, "within_tolerance": True})

FLOWS = {
    "plain": result(
        "orders", tiers=[tier("orders_db", 100, where="connection 'upstream_db'"),
                         tier("orders_topic", 100, buckets={hours()[3]: 100}),
                         tier("warehouse", 97, where="connection 'sink_db'")],
        hops=[hop("orders_db", "orders_topic", "write", 100, 100),
              hop("orders_topic", "warehouse", "consume", 100, 97, missing=3,
                  buckets=BUCKET)],
        replays=[replay("g1", 100, "7"), replay("g2", 100, "7")],
        findings=[finding("loss", "consume", "orders_topic->warehouse", 3,
                          buckets=[hours()[3]]), RISK]),
    "table": result(
        "lake", tiers=[tier("orders_topic", 10), tier("lake", 10, where="delta table /t",
                                                      as_of=4)],
        hops=[hop("orders_topic", "lake", "consume", 10, 10)],
        replays=[replay("g1", 10), replay("g2", 10)]),
    "flume": result(
        "logs", tiers=[tier("db", 10),
                       tier("collector.source", 10, where="flume agent", distinct=None),
                       tier("collector.sink", 8, where="flume agent", distinct=None),
                       tier("topic", 8)],
        hops=[hop("db", "collector.source", "write", 10, 10),
              hop("collector.source", "collector.sink", "write", 10, 8, missing=2,
                  exact=False),
              hop("collector.sink", "topic", "write", 8, 8, exact=False)],
        replays=[replay("g1", 8), replay("g2", 8)],
        findings=[finding("loss", "write", "collector.source->collector.sink", 2)]),
    "chain": result(
        "chain", tiers=[tier("raw", 10), tier("clean", 9), tier("sink", 9)],
        hops=[hop("raw", "clean", "process", 10, 9, missing=1),
              hop("clean", "sink", "consume", 9, 9)],
        replays=[replay("g1", 10, tier="raw"), replay("g2", 10, tier="raw"),
                 replay("g3", 9, "2", tier="clean"), replay("g4", 8, "3", tier="clean")],
        replays_consistent=False,
        findings=[finding("loss", "process", "raw->clean", 1)]),
}


@pytest.mark.parametrize("shape", FLOWS)
def test_every_line_of_a_report_means_something_for_its_flow(shape: str,
                                                             tmp_path: Path) -> None:
    r: Result = FLOWS[shape]
    folder = RunFolder(tmp_path)
    validation = validate_result(r, folder, Tolerance())
    render_report(r, folder, validation)
    assert meaningless(tmp_path) == []
    text = "\n".join(report_lines(tmp_path)["report.txt"])
    if shape == "table":
        assert "lake: delta table /t read as of version 4 (as_of: 4 in the flow" in text
    else:
        assert "as of" not in text
    if not validation.success:  # every failure in words: the hop, what was seen and allowed
        failures = [f.said for s in validation.suites.values() for f in s.failed]
        assert failures and all(f in text for f in failures)
    html = (tmp_path / "report.html").read_text()
    assert "seed" not in html and "<th>fingerprint</th>" not in html
    if shape == "chain":  # each topic's replays against its own first
        assert "NOT the same as the first replay" in html


def test_the_validations_failures_name_the_hop_what_was_seen_and_what_was_allowed(
        tmp_path: Path) -> None:
    validation = validate_result(FLOWS["plain"], RunFolder(tmp_path), Tolerance())
    assert [f.said for f in validation.suites["recon_hops"].failed] == [
        "orders_topic->warehouse: 3 records missing, 0 allowed"]
    chain = validate_result(FLOWS["chain"], RunFolder(tmp_path / "c"), Tolerance())
    assert [f.said for f in chain.suites["recon_replays[clean]"].failed] == [
        "the 2 replays of clean read different ids (2 different fingerprints)",
        "the 2 replays of clean read different counts: 9, 8"]


def test_the_audit_links_each_rules_documentation_not_an_internal_reference(
        tmp_path: Path) -> None:
    render_report(FLOWS["plain"], RunFolder(tmp_path))
    html = (tmp_path / "report.html").read_text()
    assert '<a href="https://kafka.apache.org/documentation/#replication">T1-replication</a>' \
        in html
    assert "(https://kafka.apache.org/documentation/#replication)" in \
        (tmp_path / "report.txt").read_text()
