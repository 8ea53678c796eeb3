"""bench/report.py turns a bench run into issue 43's targets table: each figure computed from
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
        size(1_000_000, d_kafka_recon=reader(30, jvm=1500), f_duckdb_script=reader(20),
             h_spark_floor=reader(15)),
        size(10_000_000, d_kafka_recon=reader(120, driver=175, jvm=1700),
             f_duckdb_script=reader(220), h_spark_floor=reader(60)),
        # once beyond the slope's sizes: (300 - 120) / 40 = 4.5 s/M against a slope of 10
        size(50_000_000, d_kafka_recon=reader(300, driver=172, jvm=2400))),
        fleet={"flows": 20, "window_minutes": 5, "minutes": 30, "skipped": 0,
               "verdict_after_grace_s": {"p95": 95.0}})}
    # d: 90 s over 9M = 10 s/M; h: 5 s/M: 2.0 x
    assert got["slope of d <= 1.6 x the floor h's slope"] is False
    assert got["at 1M, d <= 1.2 x the DuckDB script (f)"] is False       # 1.5
    assert got["at 10M, d <= 0.6 x the DuckDB script (f)"] is True       # 0.55
    beyond = "at 50M (once), d's cost per million beyond 10M within 15% of its 1M-10M slope"
    assert got[beyond] is False
    assert got["at 50M, driver RSS flat (10%) of the 10M run's"] is True
    assert got["at 50M, JVM peak within 25% of the 10M run's"] is False  # +41%
    assert got["JVM peak within 25% from 1M to 10M, with a fixed heap chosen by the "
               "window's size"] is True                                  # +13%
    assert got["a fleet: 20 flows on 5-minute windows for 30 minutes, verdict p95 within "
               "120 s of grace closing, none skipped"] is True
    assert got["every reader names the same ids as d, at every size"] is True


def test_the_fleets_row_says_when_its_measuring_began() -> None:
    def figure(**more: Any) -> str:
        fleet = {"flows": 8, "window_minutes": 5, "minutes": 15, "skipped": 0,
                 "verdict_after_grace_s": {"p95": 130.0}, **more}
        rows = report.targets(doc(size(1_000_000, d_kafka_recon=reader(30))), fleet=fleet)
        return next(f for what, f, met in rows if what.startswith("a fleet") and met is False)

    assert figure() == "p95 130 s, 0 skipped"  # an older file: measured from unpausing
    assert figure(warmup_s=212.4) == \
        "p95 130 s, 0 skipped (measured from 212 s after unpausing, the first runs done)"


def test_what_a_run_did_not_measure_is_never_called_met() -> None:
    rows = report.targets(doc(size(1_000_000, same=False, d_kafka_recon=reader(30))))
    met = {t[0]: t[2] for t in rows}
    assert met["at 1M, d <= 1.2 x the DuckDB script (f)"] is None
    assert met["at 10M, d <= 0.6 x the DuckDB script (f)"] is None
    assert met["slope of d <= 1.6 x the floor h's slope"] is None
    assert met["at 50M (once): cost per million, driver RSS, JVM peak"] is None
    assert met["a fleet: 20 flows on 5-minute windows under the live scheduler"] is None
    assert met["the floor's steps, each measured"] is None
    assert met["every reader names the same ids as d, at every size"] is False
    text = "\n".join(report.render(doc(size(1_000_000, d_kafka_recon=reader(30)))))
    assert text.count("| not measured |") == 6


def test_a_size_whose_run_failed_is_a_target_missed_with_the_error() -> None:
    run = doc(size(1_000_000, d_kafka_recon=reader(30)),
              size(10_000_000, d_kafka_recon=reader(120)))
    run["failed"] = {"records": 50_000_000, "error": "kafka-recon run failed (2): the step"}
    [row] = [t for t in report.targets(run) if t[0].startswith("at 50M")]
    assert row == ("at 50M (once): cost per million, driver RSS, JVM peak",
                   "the run failed: kafka-recon run failed (2): the step", False)


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


def test_a_server_is_judged_on_its_runs_after_the_first() -> None:
    served = {**reader(40), "runs_s": [61.0, 38.0, 36.0, 44.0]}  # the first pays the JIT
    assert report.warm_seconds(served) == 38.0
    assert report.warm_seconds({**reader(61), "runs_s": [61.0]}) is None


def test_the_slope_target_names_the_floor_when_it_was_measured() -> None:
    floor = [{"spark_start_s": 3.0, "steps": [{"step": "topic r1", "rows": 10, "seconds": 2.0},
                                             {"step": "upstream", "rows": 10, "seconds": 1.0}]}]
    d = doc(size(1_000_000, d_kafka_recon=reader(30), a_kafka_consumer_perf=reader(3),
                 h_spark_floor={**reader(10), "timings": floor}),
            size(5_000_000, d_kafka_recon=reader(70), a_kafka_consumer_perf=reader(7),
                 h_spark_floor={**reader(30), "timings": floor}))
    got = {t[0]: t[1:] for t in report.targets(d)}
    assert got["slope of d <= 1.6 x the floor h's slope"] == ("2.00 x (10.00 vs 5.00 s/M)", False)
    assert got["the floor's steps, each measured"] == ("at 2 of 2 sizes", True)
    assert "| topic r1 (10 rows) | 2.00 |" in report.floor_table(d["sizes"][0])
    assert "| Spark start | 3.00 |" in report.floor_table(d["sizes"][0])
    # the same seconds at both sizes: no read grows with the data
    assert "| topic r1 | 0.00 | 2.00 |" in report.floor_slopes(d)


def test_the_step_table_reads_the_laps_of_a_typed_timings_file_and_of_an_older_one() -> None:
    typed = {"schema_version": 1, "laps": {"replay": 20.0, "reconcile": 40.0},
             "spark_jobs": {"replay": 2, "reconcile": 10, "total": 12}}
    older = {"replay": 30.0, "reconcile": 50.0, "spark_jobs": {"total": 14}}
    lines = report.step_table(size(1_000_000, d_kafka_recon={**reader(60), "timings": [typed]},
                                   g_kafka_recon_before={**reader(80), "timings": [older]}))
    rows = {line.split(" | ")[0].lstrip("| "): line for line in lines[2:]}
    assert set(rows) == {"replay", "reconcile", "Spark jobs"}, lines
    assert rows["replay"] == "| replay | 30.0 | 20.0 |"
    assert rows["Spark jobs"] == "| Spark jobs | 14 | 12 |"


def test_the_driver_is_judged_on_its_resident_memory_with_its_anonymous_part_beside_it() -> None:
    ten, fifty = reader(120, driver=205), reader(600, driver=173)
    ten["peak_anon_mb"], fifty["peak_anon_mb"] = {"kafka-recon": 80}, {"kafka-recon": 81}
    rows = {t[0]: t for t in report.targets(doc(
        size(1_000_000, d_kafka_recon=reader(30)), size(10_000_000, d_kafka_recon=ten),
        size(50_000_000, d_kafka_recon=fifty)))}
    _, figure, met = rows["at 50M, driver RSS flat (10%) of the 10M run's"]
    # the resident figure fell 16%: not flat, whatever its anonymous part did
    assert met is False
    assert figure == "205 MB -> 173 MB (-15.6%); anonymous 80 MB -> 81 MB (+1.2%)"
