"""Prometheus metrics of the newest reconciled window of every flow, from the history store.

Read at scrape time: every api-server worker answers the same from the one store, and nothing
is kept in memory between scrapes. Per flow and hop, the last window's missing, duplicate and
unexpected records; per flow, its status, the window's end, how long its run took, and the age
of that window (how stale "the newest reconciled window" is: an alert when the daily run stops).

    kafka_recon_missing_records{flow,hop,side}      records missing on the hop, last window
    kafka_recon_duplicate_records{flow,hop,side}    extra copies
    kafka_recon_unexpected_records{flow,hop,side}   found with no upstream record
    kafka_recon_dead_lettered_records{flow,hop,side}  routed to a sink connector's dead-letter
                                                    queue (hops into such a sink only)
    kafka_recon_tier_records{flow,tier}             records the tier held in the window
    kafka_recon_tier_judged_records{flow,tier}      ... in the buckets its volume was judged
    kafka_recon_tier_expected_low_records{flow,tier}   the fewest its history expected there
    kafka_recon_tier_expected_high_records{flow,tier}  the most
    kafka_recon_status{flow,status}                 1 for the last window's status, else 0
    kafka_recon_window_end_timestamp_seconds{flow}  the end of the newest reconciled window
    kafka_recon_window_age_seconds{flow}            now minus that end
    kafka_recon_run_duration_seconds{flow}          the seconds its run's steps took
    kafka_recon_findings{flow}                      its loss-verdict findings
    kafka_recon_allowed_records{flow,hop,side,kind} records its tolerance allowed, per finding
    kafka_recon_tolerance_exceeded{flow,hop,side,kind}  1: the finding failed its tolerance
    kafka_recon_window_seconds{flow}                the flow's scheduled window length
    kafka_recon_closing_seconds{flow}               its grace plus disorder margin (Flow.closing)

The window length and closing come from the flow config, so one staleness rule serves a
5-minute and a daily flow (config/prometheus/kafka_recon_rules.yml).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kafka_recon.errors import ResultError
from kafka_recon.runfiles.outcomes import Timings
from kafka_recon.runfolder import RunFolder

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import Metric
    from sqlalchemy.engine import Engine

STATUSES = ("ok", "findings", "inconclusive")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def run_seconds(run_dir: str | None) -> float | None:
    """The seconds a run's steps took, from its timings.json (None when it has none)."""
    if not run_dir:
        return None
    from kafka_recon.stores.objects import at

    try:
        timings = RunFolder(at(run_dir)).read_if(Timings)
    except (ResultError, OSError):  # unreadable, or its store did not answer: not a figure
        return None
    return float(sum(timings.laps.values())) if timings else None


class HistoryCollector:
    """A prometheus_client collector over the history store (a custom collector: the values
    are the store's, read at each scrape)."""

    def __init__(self, eng: Engine | None = None, now: Any = time.time,
                 flows: set[str] | None = None) -> None:
        self._eng, self._now, self._flows = eng, now, flows  # flows: None for every flow

    @staticmethod
    def _volume(tiers: list[dict[str, Any]]) -> Iterator[Metric]:
        """Each tier's records in the newest window and, where its volume was judged, the band
        its history expected over the judged buckets beside their count."""
        from prometheus_client.core import GaugeMetricFamily

        names = {"records": "records the tier held in the newest reconciled window",
                 "judged_records": "records in the buckets whose volume was judged",
                 "expected_low_records": "the fewest records the tier's history expected in "
                                         "the judged buckets",
                 "expected_high_records": "the most records it expected there"}
        families = {k: GaugeMetricFamily(f"kafka_recon_tier_{k}", what,
                                         labels=["flow", "tier"]) for k, what in names.items()}
        for t in tiers:
            for k, family in families.items():
                value = t["expected_low" if k == "expected_low_records" else
                          "expected_high" if k == "expected_high_records" else k]
                if value is not None:
                    family.add_metric([t["flow"], t["tier"]], float(value))
        yield from families.values()

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        from kafka_recon.outputs import history

        eng = self._eng or history.engine()

        def shown(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return rows if self._flows is None else [r for r in rows if r["flow"] in self._flows]

        latest = shown(history.latest_per_flow(eng))
        hops = shown(history.latest_hops(eng))
        kinds = {k: GaugeMetricFamily(f"kafka_recon_{k}_records", f"records {what} on the hop "
                                      "in the newest reconciled window",
                                      labels=["flow", "hop", "side"])
                 for k, what in (("missing", "missing"), ("duplicate", "duplicated"),
                                 ("unexpected", "found with no upstream record"))}
        for h in hops:
            for k, family in kinds.items():
                family.add_metric([h["flow"], h["hop"], h["side"]], h[k])
        status = GaugeMetricFamily("kafka_recon_status", "1 for the status of the newest "
                                   "reconciled window, 0 for the others",
                                   labels=["flow", "status"])
        end = GaugeMetricFamily("kafka_recon_window_end_timestamp_seconds",
                                "the end of the newest reconciled window", labels=["flow"])
        age = GaugeMetricFamily("kafka_recon_window_age_seconds",
                                "seconds since the end of the newest reconciled window",
                                labels=["flow"])
        took = GaugeMetricFamily("kafka_recon_run_duration_seconds",
                                 "seconds the newest window's run took", labels=["flow"])
        found = GaugeMetricFamily("kafka_recon_findings", "loss-verdict findings of the "
                                  "newest reconciled window", labels=["flow"])
        allowed = GaugeMetricFamily("kafka_recon_allowed_records", "records of the kind the "
                                    "hop's tolerance allowed in the newest reconciled window",
                                    labels=["flow", "hop", "side", "kind"])
        exceeded = GaugeMetricFamily("kafka_recon_tolerance_exceeded", "1 when the finding "
                                     "failed its tolerance in the newest reconciled window",
                                     labels=["flow", "hop", "side", "kind"])
        dead = GaugeMetricFamily("kafka_recon_dead_lettered_records", "records a sink "
                                 "connector routed to its dead-letter queue on the hop in the "
                                 "newest reconciled window", labels=["flow", "hop", "side"])
        for f in shown(history.latest_findings(eng)):
            labels = [f["flow"], f["hop"], f["side"], f["kind"]]
            if f["kind"] == "dead_lettered":
                dead.add_metric(labels[:3], f["records"])
            if f["allowed"] is not None:
                allowed.add_metric(labels, f["allowed"])
            exceeded.add_metric(labels, float(f["failed"]))
        yield from (allowed, exceeded, dead, *self._schedule(latest))
        yield from self._volume(shown(history.latest_tiers(eng)))
        now = float(self._now())
        for r in latest:
            for s in STATUSES:
                status.add_metric([r["flow"], s], 1.0 if r["status"] == s else 0.0)
            t = history.epoch(r["window_end"])
            end.add_metric([r["flow"]], t)
            age.add_metric([r["flow"]], max(0.0, now - t))
            found.add_metric([r["flow"]], r["findings"])
            if (seconds := run_seconds(r["run_dir"])) is not None:
                took.add_metric([r["flow"]], seconds)
        yield from (*kinds.values(), status, end, age, took, found)

    @staticmethod
    def _schedule(latest: list[dict[str, Any]]) -> Iterator[Metric]:
        """Each recorded flow's window length and closing, from the flow config (a flow no
        longer configured, or a config that cannot be read, has none)."""
        from prometheus_client.core import GaugeMetricFamily

        from kafka_recon.config import load_flows_partial
        from kafka_recon.settings import config_path

        window = GaugeMetricFamily("kafka_recon_window_seconds", "the length of the flow's "
                                   "scheduled window", labels=["flow"])
        closing = GaugeMetricFamily("kafka_recon_closing_seconds", "how long after a window's "
                                    "end it closes: grace plus disorder margin",
                                    labels=["flow"])
        flows = load_flows_partial(config_path())[0]
        for r in latest:
            if (flow := flows.get(r["flow"])) is not None:
                window.add_metric([flow.name], flow.window.total_seconds())
                closing.add_metric([flow.name], flow.closing.total_seconds())
        yield from (window, closing)


def registry(eng: Engine | None = None, flows: set[str] | None = None) -> CollectorRegistry:
    from prometheus_client import CollectorRegistry

    reg = CollectorRegistry(auto_describe=False)
    reg.register(HistoryCollector(eng, flows=flows))
    return reg


def exposition(eng: Engine | None = None, flows: set[str] | None = None) -> bytes:
    """The metrics in Prometheus' text format (of `flows` only, when given)."""
    from prometheus_client import generate_latest

    return generate_latest(registry(eng, flows))
