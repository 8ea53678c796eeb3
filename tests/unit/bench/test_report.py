"""bench/report.py turns a bench run into issue 15's targets table: each figure computed from
the medians, and `not measured` (never a pass) for what the run did not measure."""

from __future__ import annotations

from typing import Any

import pytest

from bench import report

pytestmark = pytest.mark.unit


def reader(median: float, driver: float = 170, jvm: float = 1400,
           jobs: list[int] | None = None) -> dict[str, Any]:
    timings = [{"spark_jobs": {"total": n}} for n in jobs or []]
    return {"seconds": {"median": median, "min": median, "max": median},
            "records_per_second": 1, "peak_rss_mb": {"kafka-recon": driver, "java": jvm},
            **({"timings": timings} if jobs else {})}


def size(n: int, same: bool = True, **readers: dict[str, Any]) -> dict[str, Any]:
    return {"records": n, "data": {}, "results": readers,
            "same_answer": {"f_duckdb_script": {"equal": same, "differ": []},
                            "all_equal": same}}


def doc(*sizes: dict[str, Any]) -> dict[str, Any]:
    return {"sizes": list(sizes), "replays": 2, "repeats": 3, "masters": ["local[2]"],
            "machine": {"cores": 2, "memory_gb": 23.5, "python": "3.11", "when": "now"}}


def test_the_fit_gives_time_per_million_and_the_fixed_cost() -> None:
    slope, intercept = report.fit([(1, 30.0), (5, 70.0), (10, 120.0)])
    assert slope == pytest.approx(10.0, abs=0.01) and intercept == pytest.approx(20.0, abs=0.1)


def test_each_target_is_met_or_not_from_the_medians_of_one_run() -> None:
    got = {t[0]: t[2] for t in report.targets(doc(
        size(1_000_000, d_kafka_recon=reader(30, jobs=[7, 9]), g_kafka_recon_before=reader(100),
             f_duckdb_script=reader(20), a_kafka_consumer_perf=reader(3)),
        size(10_000_000, d_kafka_recon=reader(200, driver=175, jvm=2000, jobs=[15]),
             f_duckdb_script=reader(150), a_kafka_consumer_perf=reader(12))))}
    assert got["at 1M, d <= 0.55 x the code before (g)"] is True       # 0.30
    assert got["at 1M, d <= 1.7 x the DuckDB script (f)"] is True       # 1.5
    # d: 170 s over 9M = 18.9 s/M; a: 1 s/M, x 2.5 x 2 replays = 5 s/M
    assert got["slope of d <= 2.5 x ConsumerPerformance's slope x 2 replays"] is False
    assert got["at the largest size (10M), d <= 1.2 x the DuckDB script"] is False  # 1.33
    assert got["Python driver peak RSS within 10% from 1M to 10M"] is True
    assert got["JVM peak RSS within 25% from 1M to 10M"] is False       # +43%
    assert got["every reader names the same ids as d, at every size"] is True
    assert got["Spark jobs per run of d < 15 (the aim), at every size"] is False  # 15 at 10M


def test_what_a_run_did_not_measure_is_never_called_met() -> None:
    rows = report.targets(doc(size(1_000_000, same=False, d_kafka_recon=reader(30))))
    met = {t[0]: t[2] for t in rows}
    assert met["at 1M, d <= 0.55 x the code before (g)"] is None
    assert met["at 1M, d <= 1.7 x the DuckDB script (f)"] is None
    assert all(v is None for k, v in met.items() if "slope" in k or "largest" in k)
    assert met["every reader names the same ids as d, at every size"] is False
    text = "\n".join(report.render(doc(size(1_000_000, d_kafka_recon=reader(30)))))
    assert met["Spark jobs per run of d < 15 (the aim), at every size"] is None
    assert text.count("| not measured |") == 5


def test_a_tune_table_gives_wall_and_cpu_ratios_to_base_when_cpu_was_measured() -> None:
    tune = {"variants": {"base": {"median_s": 60.0, "seconds": [60.0], "median_cpu_s": 100.0},
                         "other": {"median_s": 75.0, "seconds": [75.0], "median_cpu_s": 130.0}},
            "same_ids": {"base": True, "other": True}}
    lines = report.tune_table(tune)
    assert "median CPU s" in lines[0]
    assert lines[3] == "| other | 75.0 | 75.0 | 1.25 | 130.0 | 1.30 | True |"
    # an older tune without CPU figures keeps its four columns
    for v in tune["variants"].values():
        del v["median_cpu_s"]
    assert report.tune_table(tune)[3] == "| other | 75.0 | 75.0 | 1.25 | True |"


def test_a_tune_without_a_base_variant_gives_ratios_to_its_first() -> None:
    tune = {"variants": {"jit_x10": {"median_s": 40.0, "seconds": [40.0]},
                         "jit_x3": {"median_s": 36.0, "seconds": [36.0]}},
            "same_ids": {"jit_x10": True, "jit_x3": True}}
    lines = report.tune_table(tune)
    assert lines[0] == "| variant | median s | runs s | ratio to jit_x10 | same ids |"
    assert lines[3] == "| jit_x3 | 36.0 | 36.0 | 0.90 | True |"


def test_runs_through_a_spark_connect_server_are_judged_on_those_after_its_first() -> None:
    served = {**reader(40), "runs_s": [61.0, 38.0, 36.0, 44.0]}  # the first pays the JIT
    rows = report.targets(doc(size(1_000_000, d_kafka_recon=reader(60),
                                   g_kafka_recon_before=reader(80),
                                   f_duckdb_script=reader(25),
                                   **{report.CONNECT: served})))
    got = {t[0]: (t[1], t[2]) for t in rows}
    what = ("at 1M, d through one Spark Connect server, median of its runs after the first "
            "(3; the first 61.0 s)")
    assert got[f"{what} <= 0.55 x the code before (g)"] == ("0.47 x (38.0 s)", True)
    assert got[f"{what} <= 1.7 x the DuckDB script (f)"] == ("1.52 x (38.0 s)", True)
    # a server that ran once says nothing of warm runs
    once = report.targets(doc(size(1_000_000, d_kafka_recon=reader(60),
                                   g_kafka_recon_before=reader(80),
                                   **{report.CONNECT: {**reader(61), "runs_s": [61.0]}})))
    assert not [t for t in once if "Spark Connect" in t[0]]


def test_the_slope_target_names_the_floor_when_it_was_measured() -> None:
    floor = [{"spark_start_s": 3.0, "steps": [{"step": "topic r1", "rows": 10, "seconds": 2.0},
                                             {"step": "upstream", "rows": 10, "seconds": 1.0}]}]
    d = doc(size(1_000_000, d_kafka_recon=reader(30), a_kafka_consumer_perf=reader(3),
                 h_spark_floor={**reader(10), "timings": floor}),
            size(5_000_000, d_kafka_recon=reader(70), a_kafka_consumer_perf=reader(7),
                 h_spark_floor={**reader(30), "timings": floor}))
    figure = {t[0]: t[1] for t in report.targets(d)}[
        "slope of d <= 2.5 x ConsumerPerformance's slope x 2 replays"]
    assert figure == "10.00 s/M against 5.00 s/M (a: 1.00 s/M; h, the floor: 5.00 s/M)"
    assert "| topic r1 (10 rows) | 2.00 |" in report.floor_table(d["sizes"][0])
    assert "| Spark start | 3.00 |" in report.floor_table(d["sizes"][0])
    # the same seconds at both sizes: no read grows with the data
    assert "| topic r1 | 0.00 | 2.00 |" in report.floor_slopes(d)
