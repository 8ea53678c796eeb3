"""The step put together: a loss found by counts named by the id tiers around it."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

pyspark = pytest.importorskip("pyspark")
from pyspark.sql import SparkSession  # noqa: E402

from kafka_recon.runfiles.aggregates import CounterGap, HopTally  # noqa: E402
from kafka_recon.spark import reconcile as rc  # noqa: E402
from tests.unit.spark.frames import at, counts  # noqa: E402


def test_a_counter_that_missed_a_delivered_batch_gives_way_to_the_id_tiers(
        spark: SparkSession, tmp_path: Path) -> None:
    """An agent killed after delivering a batch it never counted drained: its counters say
    1000 lost inside it and 100 arriving from nowhere after it; the ids say 900 lost."""
    from types import SimpleNamespace

    from kafka_recon.runfolder import RunFolder

    names = ["db", "agent.source", "agent.sink", "topic"]
    points = [SimpleNamespace(name=n) for n in names]
    db = counts(spark, [(str(i), at(1)) for i in range(2000)])
    topic = counts(spark, [(str(i), at(1)) for i in range(1100)])
    bucket = "2026-11-20T00:00:00Z"

    def hop(a: str, b: str, missing: int, unexpected: int) -> HopTally:
        return HopTally.model_validate({
            "from": a, "to": b, "side": "write", "exact": False, "expected": 0, "observed": 0,
            "missing": missing, "unexpected": unexpected,
            "buckets": {"missing": {bucket: missing} if missing else {},
                        "unexpected": {bucket: unexpected} if unexpected else {}}})
    hops = [hop("db", "agent.source", 0, 0), hop("agent.source", "agent.sink", 1000, 0),
            hop("agent.sink", "topic", 0, 100)]
    rc.name_ids_across_counts(points, {"db": db, "agent.source": None, "agent.sink": None,
                                      "topic": topic}, hops, RunFolder(tmp_path))
    lossy, gained = hops[1], hops[2]
    assert (lossy.missing, gained.unexpected) == (900, 0)
    assert lossy.counter_gap == CounterGap(counted=1000, lost=900,
                                           passed_on_uncounted={"agent.sink->topic": 100})
    assert lossy.missing_ids is not None
    with open(lossy.missing_ids) as fh:
        assert len(fh.read().splitlines()) == 901  # a header and the 900 ids
    # counts that no later gain explains stay counted, unnamed
    hops = [hop("db", "agent.source", 0, 0), hop("agent.source", "agent.sink", 1000, 0),
            hop("agent.sink", "topic", 0, 0)]
    rc.name_ids_across_counts(points, {"db": db, "agent.source": None, "agent.sink": None,
                                      "topic": topic}, hops, RunFolder(tmp_path / "b"))
    assert hops[1].missing == 1000 and hops[1].missing_ids is None
