"""A quiet upstream is not an ok window: every tier of a flow agrees on a window in which the
upstream wrote nothing for two hours, and each tier's own history says those buckets are far
too quiet (issue 64). With the default check, warn, the window stays ok and the report names
the buckets and the band; with `volume: {check: fail}` the window fails with volume findings.

Real here: the broker, Spark, SQLite tiers and kafka-recon's store (SQLite), whose history is
seeded with 14 ok days as the DAG's record step would have written them."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from harness.services.kafka import KafkaCluster
from kafka_recon import orchestrate
from tests.factories import iso, result, tier
from tests.integration.engine_harness import END, START, Scenario, at

pytestmark = pytest.mark.integration

QUIET = ("10:00", "11:00")


def _seed_history(days: int = 14) -> None:
    from kafka_recon.outputs import history

    for d in range(1, days + 1):
        day = START - timedelta(days=d)
        buckets = {iso(day + timedelta(hours=h)): 30 for h in range(24)}
        history.record(result("f", start=day, tiers=[tier(n, 720, buckets=buckets)
                                                     for n in ("db", "topic", "sink")]),
                       run_dir=f"/runs/f/{day:%Y-%m-%d}")


def test_a_quiet_upstream_every_tier_agrees_on_is_found_against_its_own_history(
        tmp_path: Path, kafka: KafkaCluster, spark: Any,
        monkeypatch: pytest.MonkeyPatch, artifacts_dir: Path) -> None:
    monkeypatch.setenv("KAFKA_RECON_STORE", f"sqlite:///{tmp_path / 'store.db'}")
    _seed_history()
    scn = Scenario(tmp_path, kafka.bootstrap, partitions=1)
    # 30 records an hour in every tier, none between 10:00 and 12:00
    rows = {i: at(i * 2) for i in range(1, 720) if not 600 <= i * 2 < 720}
    scn.upstream(rows)
    scn.produce(list(rows.items()))
    scn.sink(list(rows.items()))

    r = scn.reconcile(spark)
    assert r["status"] == "ok", r
    volume = {f["hop"]: f for f in r["findings"] if f["kind"] == "volume"}
    assert set(volume) == {"db", "topic", "sink"}, r["findings"]
    for f in volume.values():
        assert [b[11:16] for b in f["buckets"]] == list(QUIET)
        assert (f["count"], f["direction"], f["within_tolerance"]) == (0, "too few", True)
        low, high = f["band"]
        assert 0 < low < 60 < high, f
    bands = json.loads((scn.out / "bands.json").read_text())
    assert bands["bands"][0]["references"] == 14
    assert bands["bands"][0]["basis"] == "the same hour on 14 days"
    # the freshness it learned: the last hour of each of the 14 days held records
    assert bands["usual_lag"] == {"db": 3600.0, "topic": 3600.0, "sink": 3600.0}
    assert not any(f["kind"] == "freshness" for f in r["findings"])
    run = orchestrate.load("f", START.isoformat(), END.isoformat(), scn.config, scn.out)
    # the bands as Great Expectations: one per tier and bucket, its bounds as kwargs and its
    # history in the meta; with warn they fail nothing
    validation = orchestrate.validate(run)
    assert validation.success, validation
    bands_suite = validation.suites["recon_bands"]
    assert not bands_suite.success
    said = sorted(f.words for f in bands_suite.failed)
    # the pair over every bucket, and each of the 6 buckets out of its band on its own
    assert len(said) == 7 and said[0].startswith("6 bucket(s) with fewer records than"), said
    assert said[1].startswith("db: 0 records in the bucket of "), said
    suite = json.loads((scn.out / "gx" / "expectations" / "recon_bands.json").read_text())
    assert len(suite["expectations"]) == 2 + 6
    own = suite["expectations"][2]
    assert own["meta"]["history"] == "the same hour on 14 days"
    assert {"min_value", "max_value", "row_condition"} <= set(own["kwargs"])
    orchestrate.report(run)
    text = (scn.out / "report.txt").read_text()
    assert f"f: db held 0 records between {QUIET[0]} and 12:00; its history expects " in text
    assert "reported, the window stays ok (volume check: warn)" in text
    # the chart shades each tier's usual range (kept for a person to look at)
    chart = (scn.out / "chart.png").read_bytes()
    assert chart.startswith(b"\x89PNG")
    (artifacts_dir / "volume-chart.png").write_bytes(chart)

    # the owners decide: with fail, the same window fails on its volume alone
    scn.config.write_text(scn.config.read_text().replace(
        "    replays: 2\n", "    replays: 2\n    volume: {check: fail}\n"))
    r = scn.reconcile(spark)
    assert r["status"] == "findings"
    failing = [f for f in r["findings"] if f["kind"] == "volume"]
    assert len(failing) == 3 and not any(f["within_tolerance"] for f in failing)
    assert not any(f["kind"] in ("loss", "duplicate", "unexpected") for f in r["findings"])


def test_a_sink_that_stopped_loading_is_found_at_the_time_it_stopped_though_all_agree(
        tmp_path: Path, kafka: KafkaCluster, spark: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The upstream went quiet at 14:10 and the sink stopped loading then: every tier agrees,
    no volume history yet, and `freshness.after` still names 14:10 for each."""
    monkeypatch.setenv("KAFKA_RECON_STORE", f"sqlite:///{tmp_path / 'store.db'}")
    scn = Scenario(tmp_path, kafka.bootstrap, partitions=1)
    rows = {i: at(i * 2) for i in range(1, 426)}  # the last at 14:10
    scn.upstream(rows)
    scn.produce(list(rows.items()))
    scn.sink(list(rows.items()))
    scn.config.write_text(scn.config.read_text().replace(
        "    replays: 2\n", "    replays: 2\n    freshness: {after: 2h, check: fail}\n"))
    r = scn.reconcile(spark)
    assert r["status"] == "findings", r
    stale = {f["hop"]: f for f in r["findings"] if f["kind"] == "freshness"}
    assert set(stale) == {"db", "topic", "sink"}
    stopped = iso(at(850))
    assert all(f["newest"] == stopped for f in stale.values()), stale
    assert "no record after " + stopped in stale["sink"]["why"]
    assert not any(f["kind"] in ("loss", "volume") for f in r["findings"])
    tiers = {t["name"]: t for t in r["tiers"]}
    assert tiers["topic"]["newest"] == stopped and tiers["topic"]["newest_arrival"] == stopped
    run = orchestrate.load("f", START.isoformat(), END.isoformat(), scn.config, scn.out)
    from kafka_recon.result.model import Result

    result = Result.load(scn.out / "result.json")
    assert result.subject().startswith("FINDINGS f: db stale, topic stale, sink stale")
    orchestrate.report(run)
    assert f"f: sink stopped: no record after {stopped}" in (scn.out / "report.txt").read_text()


def test_a_new_flow_seeded_from_its_past_days_is_judged_from_its_first_window(
        tmp_path: Path, kafka: KafkaCluster, spark: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """No window of the flow was ever reconciled: `seed-history` counts each tier's past 8
    days per bucket (the SQL tiers by their queries, the topic by its offsets, no replay), and
    the first window is judged against them."""
    from kafka_recon.config import load_flow
    from kafka_recon.orchestrate import seed_history
    from kafka_recon.outputs import history

    monkeypatch.setenv("KAFKA_RECON_STORE", f"sqlite:///{tmp_path / 'store.db'}")
    scn = Scenario(tmp_path, kafka.bootstrap, partitions=1)
    past = {i: START - timedelta(days=8) + timedelta(minutes=2 * i) for i in range(1, 8 * 720)}
    today = {100_000 + i: at(i * 2) for i in range(1, 720) if not 600 <= i * 2 < 720}
    for rows in (past, today):
        scn.upstream(rows)
        scn.produce(list(rows.items()))
        scn.sink(list(rows.items()))
    said = seed_history(load_flow(scn.config, "f"), days=8, until=START)
    assert [line.split(":")[0] for line in said] == ["db", "topic", "sink"], said
    assert "192 bucket(s) seeded" in said[1] and "offsets between" in said[1], said
    seeded = history.bucket_history("f", "topic", START - timedelta(days=9), START)
    assert len(seeded) == 192 and set(seeded.values()) <= {29, 30}, seeded

    r = scn.reconcile(spark)
    volume = {f["hop"]: f for f in r["findings"] if f["kind"] == "volume"}
    assert set(volume) == {"db", "topic", "sink"}, r["findings"]
    assert all([b[11:16] for b in f["buckets"]] == list(QUIET) for f in volume.values())
