"""Write docs/performance.md from bench/results.json and bench/fleet*.json.

The measured part is replaced on every run; the notes below the `<!-- measured -->` marker are
kept. The targets are issue 65's, each with its figure, whether this bench run met it and,
when not, where the time went.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from kafka_recon.runfiles.outcomes import Timings
from kafka_recon.settings import REPO_ROOT

NAMES = {"a_kafka_consumer_perf": "a. Kafka ConsumerPerformance (bare read)",
         "b_plain_python": "b. plain confluent-kafka script, one hop's missing ids",
         "c_kcat": "c. kcat read and count",
         "d_kafka_recon": "d. kafka-recon run (2 replays + reconcile, to result.json)",
         "e_quick_estimate": "e. quick offset estimate",
         "f_duckdb_script": "f. confluent-kafka twice + DuckDB, the full answer",
         "g_kafka_recon_before": "g. kafka-recon before this change (a worktree)",
         "h_spark_floor": "h. the floor: the same Spark reading the same inputs and grouping "
                          "their ids once"}
DRIVER, JVM = "kafka-recon", "java"  # program names in the peak-RSS figures
MILLION = 1_000_000


CONNECT = "d_kafka_recon@connect"  # d's runs through one Spark Connect server


def label(key: str) -> str:
    if key == CONNECT:
        return f"{NAMES['d_kafka_recon']}, through a Spark Connect server"
    if "@" in key:
        base, master = key.split("@", 1)
        return f"{NAMES.get(base, base)}, master {master}"
    return NAMES.get(key, key)


def median(r: dict[str, Any]) -> float:
    return float(r["seconds"]["median"])


def fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least squares over (millions of records, seconds): (slope s per million, intercept s)."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    return slope, my - slope * mx


def warm_seconds(r: dict[str, Any]) -> float | None:
    """The median of a server's warm runs: every measured run when the bench warmed the server
    first (`warmups`), else its runs after the first (which pays the JIT), when it had some."""
    runs = r.get("runs_s") or []
    if r.get("warmups"):
        return float(statistics.median(runs)) if runs else None
    return float(statistics.median(runs[1:])) if len(runs) >= 2 else None


def series(doc: dict[str, Any], reader: str) -> list[tuple[float, float]]:
    return [(s["records"] / MILLION, median(s["results"][reader])) for s in doc["sizes"]
            if reader in s["results"]]


def rss(result: dict[str, Any], program: str, kind: str = "peak_rss_mb") -> float | None:
    """A program's peak resident MB; kind "peak_anon_mb" its anonymous part (benches
    before 2026-11-29 did not measure it)."""
    value = result.get(kind, {}).get(program)
    return float(value) if value else None


SCALE = 10 * MILLION  # the slope is fitted up to here; a size beyond is run once, to check it


def slope_series(doc: dict[str, Any], reader: str) -> list[tuple[float, float]]:
    """(millions, median seconds) of the sizes the slope is fitted through: 1M to 10M. A
    small window measures the fixed cost, not the cost per record: through 10k and 1M the
    floor's line is as flat as its fixed cost is large."""
    return [p for p in series(doc, reader) if 1 <= p[0] <= SCALE / MILLION]


def step_slopes(doc: dict[str, Any], reader: str) -> dict[str, float]:
    """Each step of a reader's runs (its `timings.json` laps) as seconds per million records,
    fitted through the sizes the slope is (1M to 10M), where it ran at two of them at least."""
    per: dict[str, list[tuple[float, float]]] = {}
    for s in slope_sizes(doc):
        r = s["results"].get(reader)
        if r is None:
            continue
        for step, secs in laps(r).items():
            if step != "Spark jobs":
                per.setdefault(step, []).append((s["records"] / MILLION, secs))
    return {k: fit(v)[0] for k, v in per.items() if len(v) >= 2}


def slope_cause(doc: dict[str, Any]) -> str:
    """The slope's measured cause: d's steps per million records beside the floor's reading
    of the same inputs and its one grouping by id."""
    d = step_slopes(doc, "d_kafka_recon")
    h = {k: slope for k, (slope, _) in floor_fits(slope_sizes(doc)).items()}
    if not d:
        return "d's runs have no timings to split its slope by step"
    words = "; ".join(f"{'Python start and exit' if k == 'rest' else k.replace('_', ' ')} "
                      f"{v:.2f}" for k, v in d.items())
    out = f"d's steps, s per M: {words}"
    if h:
        out += ("; the floor's: " + "; ".join(f"{k} {v:.2f}" for k, v in h.items()))
    return out


def slope_sizes(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in doc["sizes"] if 1 <= s["records"] / MILLION <= SCALE / MILLION]


SMALL = 10_000  # the small window of the targets


def laps(r: dict[str, Any], warm: bool = False) -> dict[str, float]:
    """The median seconds of each step of a reader's runs (its `timings.json`), and `rest`:
    the run's wall time beyond its steps (Python's start and imports, the exit). `warm`: a
    server's runs after its first only."""
    runs = list(zip(r.get("runs_s") or [], r.get("timings") or [], strict=False))
    if warm and len(runs) >= 2 and not r.get("warmups"):
        runs = runs[1:]
    typed = [(wall, Timings.parse(t, "a run's timings")) for wall, t in runs]
    steps = sorted({s for _, t in typed for s in t.laps}, key=lambda s: (
        STEP_ORDER.index(s) if s in STEP_ORDER else len(STEP_ORDER), s))
    out = {s: statistics.median(t.laps[s] for _, t in typed if s in t.laps) for s in steps}
    if typed:
        out["rest"] = max(0.0, statistics.median(wall - sum(t.laps.values())
                                                 for wall, t in typed))
    jobs = [t.spark_jobs["total"] for _, t in typed if t.spark_jobs]
    if jobs:
        out["Spark jobs"] = statistics.median(jobs)
    return out


STEP_ORDER = ["stage", "spark_start", "replay", "reconcile", "validate", "report", "rest"]


def where_time_went(r: dict[str, Any], warm: bool = False) -> str:
    """A run's measured cause: its median seconds per step, in words."""
    got = laps(r, warm)
    if not got:
        return "no timings"
    jobs = got.pop("Spark jobs", None)
    parts = [f"{'Python start and exit' if k == 'rest' else k.replace('_', ' ')} {v:.1f}"
             + (f" ({jobs:.0f} Spark jobs in all)" if k == "reconcile" and jobs else "")
             for k, v in got.items()]
    return "; ".join(parts) + " s"


def targets(doc: dict[str, Any], fleets: dict[int, dict[str, Any]] | None = None
            ) -> list[tuple[str, str, bool | None, str]]:
    """Issue 65's targets: (target, figure, met, the measured cause when not met); met is None
    when this run did not measure it. `fleets`: bench.fleet's results by their flows."""
    by_n = {s["records"]: s for s in doc["sizes"]}
    out: list[tuple[str, str, bool | None, str]] = []
    small = by_n.get(SMALL, {}).get("results", {})
    warm = small.get(CONNECT)
    if warm and (w := warm_seconds(warm)) is not None:
        first = (f"after {warm['warmups']} runs to warm it" if warm.get("warmups")
                 else f"its first run {warm['runs_s'][0]:.1f} s")
        out.append(("a 10k-record window through a warm engine (a Spark Connect server) "
                    "<= 3 s", f"{w:.1f} s ({first})", w <= 3,
                    where_time_went(warm, warm=True)))
    else:
        out.append(("a 10k-record window through a warm engine (a Spark Connect server) "
                    "<= 3 s", "not run (`--masters local[2],connect --records 10000,...`)",
                    None, ""))
    own = small.get("d_kafka_recon")
    out.append(("a 10k-record window with a Spark of its own (local[2], as spark-submit "
                "starts one) <= 8 s",
                f"{median(own):.1f} s" if own else "not run", median(own) <= 8 if own else None,
                where_time_went(own) if own else ""))
    big = by_n.get(MILLION, {}).get("results", {})
    served, duck = big.get(CONNECT), big.get("f_duckdb_script")
    w = warm_seconds(served) if served else None
    out.append(("at 1M, the deployed default (a warm Spark Connect server) <= 1.0 x the "
                "DuckDB script (f)",
                f"{w / median(duck):.2f} x ({w:.1f} s vs {median(duck):.1f} s)"
                if w is not None and duck else "not run",
                w <= median(duck) if w is not None and duck else None,
                where_time_went(served, warm=True) if served else ""))
    d_pts, h_pts = slope_series(doc, "d_kafka_recon"), slope_series(doc, "h_spark_floor")
    if len(d_pts) >= 2 and len(h_pts) >= 2:
        (d_slope, _), (h_slope, _) = fit(d_pts), fit(h_pts)
        out.append(("slope of d <= 1.2 x the floor h's slope",
                    f"{d_slope / h_slope:.2f} x ({d_slope:.2f} vs {h_slope:.2f} s/M)",
                    d_slope <= 1.2 * h_slope, slope_cause(doc)))
    else:
        out.append(("slope of d <= 1.2 x the floor h's slope", "needs d and h at two sizes",
                    None, ""))
    same = [s["same_answer"].get("all_equal") for s in doc["sizes"] if s.get("same_answer")]
    out.append(("every reader names the same ids as d, at every size",
                f"{sum(1 for x in same if x)} of {len(same)} sizes",
                all(same) if same else None, ""))
    for flows, limit in ((20, 60.0), (50, None)):
        fleet = (fleets or {}).get(flows)
        what = (f"{flows} five-minute flows for 30 minutes, verdict p95 <= {limit:.0f} s after "
                "closing, none skipped" if limit else
                f"{flows} five-minute flows for 30 minutes, measured and reported")
        if not fleet:
            out.append((what, f"not run (`make bench-fleet FLEET_ARGS=\"--flows {flows}\"`)",
                        None, ""))
            continue
        s = fleet["verdict_after_grace_s"]
        figure = (f"p50 {s['p50']:.0f} s, p95 {s['p95']:.0f} s, max {s['max']:.0f} s; "
                  f"{fleet['skipped']} of {fleet['windows']} windows skipped, "
                  f"{fleet['not_ok']} not ok; {fleet['minutes']:g} minutes measured")
        met = fleet["skipped"] == 0 and fleet["not_ok"] == 0 and fleet["minutes"] >= 30 and (
            limit is None or s["p95"] <= limit)
        out.append((what, figure, met, fleet_cause(fleet)))
    return out


def per_window(fleet: dict[str, Any]) -> dict[str, float]:
    """CPU seconds per window of the measured minutes, by part (the feeding apart)."""
    cpu = (fleet.get("cpu") or {}).get("cpu_seconds") or {}
    windows = max(1, int(fleet["flows"] * fleet["minutes"] / fleet["window_minutes"]))
    return {part: round(secs / windows, 1) for part, secs in cpu.items()}


def fleet_cause(fleet: dict[str, Any]) -> str:
    """Where a fleet's windows waited: its Spark step's median start and end after closing,
    the cores busy, and the CPU a window cost."""
    tl = fleet.get("task_timeline") or {}
    spark = tl.get("replay_reconcile", {})
    cpu = per_window(fleet)
    spent = sum(v for k, v in cpu.items() if k != "pipelines")
    busy = (fleet.get("cpu") or {}).get("cores_busy")
    parts = []
    if fleet.get("skipped"):
        # a fleet the machine cannot keep up with: its queue grows window after window
        late = fleet["verdict_after_grace_s"]
        parts.append(f"the machine fell behind the fleet: {fleet['skipped']} of "
                     f"{fleet['windows']} windows had no verdict by the end, and the others' "
                     f"came a median {late['p50'] / 60:.0f} minutes after closing, later "
                     "with each window")
    if spark:
        staged = tl.get("stage", {}).get("end_date")
        waited = (f", {spark.get('queued_when', 0) - staged:.0f} s of it after staging, "
                  f"waiting for one of {fleet.get('replay_slots', '?')} replay slots"
                  if staged is not None and "queued_when" in spark else "")
        parts.append(f"the Spark step started {spark.get('start_date', 0):.0f} s and ended "
                     f"{spark.get('end_date', 0):.0f} s after closing (medians){waited}")
    if cpu:
        parts.append(f"{spent:.1f} CPU s a window beside the feeding"
                     + (f", {busy:.2f} of 2 cores busy" if busy else ""))
    fed = fleet.get("feeder") or {}
    if fed.get("samples") and fleet.get("not_ok") and fed["tick_max_s"] > 30:
        # the rows of a late tick are stamped over its delay: later than the flows' grace
        parts.append(f"the feeder fell {fed['tick_max_s']:.0f} s behind its clock, so some "
                     "records reached the upstream and the topic after their window's grace")
    return "; ".join(parts)


def small_window_table(doc: dict[str, Any]) -> list[str]:
    """Where a small window's seconds go, per setup: median seconds per step."""
    size = next((s for s in doc["sizes"] if s["records"] == SMALL), None)
    if size is None:
        return []
    cols = [(k, k == CONNECT) for k in ("d_kafka_recon", CONNECT) if k in size["results"]]
    per = {k: laps(size["results"][k], warm) for k, warm in cols}
    rows = [s for s in [*STEP_ORDER, "Spark jobs"] if any(s in per[k] for k, _ in cols)]
    def title(k: str) -> str:
        if k == "d_kafka_recon":
            return "a Spark of its own"
        n = size["results"][k].get("warmups")
        return (f"a warm Spark Connect server (after {n} unmeasured runs)" if n else
                "a warm Spark Connect server (runs after the first)")

    head = ["| step | " + " | ".join(title(k) for k, _ in cols) + " |",
            "|---|" + "---|" * len(cols)]
    body = [f"| {'Python start and exit' if s == 'rest' else s.replace('_', ' ')} | "
            + " | ".join((f"{per[k][s]:.0f}" if s == "Spark jobs" else f"{per[k][s]:.2f}")
                         if s in per[k] else "-" for k, _ in cols) + " |" for s in rows]
    walls = [f"{median(size['results'][k]):.2f}" if not warm else
             f"{warm_seconds(size['results'][k]) or median(size['results'][k]):.2f}"
             for k, warm in cols]
    return [*head, *body, "| **end to end** | " + " | ".join(walls) + " |"]


def fleet_tables(fleets: dict[int, dict[str, Any]]) -> list[str]:
    """Each fleet's verdict times, CPU per window and task chain."""
    if not fleets:
        return []
    out = ["| flows | minutes measured | windows | skipped | not ok | verdict after closing "
           "p50 / p95 / max s | CPU s per window (beside the feeding) | cores busy "
           "| the feeder's longest tick / a record's longest wait in its producer, s |",
           "|---|---|---|---|---|---|---|---|---|"]
    for n, f in sorted(fleets.items()):
        s, cpu = f["verdict_after_grace_s"], per_window(f)
        fed = f.get("feeder") or {}
        out.append(f"| {n} | {f['minutes']:g} | {f['windows']} | {f['skipped']} | "
                   f"{f['not_ok']} | {s['p50']} / {s['p95']} / {s['max']} | "
                   f"{sum(v for k, v in cpu.items() if k != 'pipelines'):.1f} | "
                   f"{(f.get('cpu') or {}).get('cores_busy', '-')} | "
                   + (f"{fed['tick_max_s']} / {fed['producer_wait_max_s']} |"
                      if fed.get("samples") else "not recorded |"))
    for n, f in sorted(fleets.items()):
        tl = f.get("task_timeline") or {}
        if tl:
            out += ["", f"The task chain of a window, {n} flows: median seconds after its "
                        "closing when each task was queued, started and ended "
                        f"({len(tl)} tasks a window).", "",
                    "| task | queued | started | ended |", "|---|---|---|---|",
                    *(f"| {t} | {m.get('queued_when', '-')} | {m.get('start_date', '-')} | "
                      f"{m.get('end_date', '-')} |" for t, m in tl.items())]
        cpu = per_window(f)
        if cpu:
            out += ["", f"CPU seconds per window by part, {n} flows: " + ", ".join(
                f"{k} {v}" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1])) + "."]
    return out


def scaling_table(doc: dict[str, Any]) -> list[str]:
    sizes = [s["records"] for s in doc["sizes"]]
    head = " | ".join(f"{n / MILLION:g}M s" for n in sizes)
    lines = [f"| reader | {head} | slope s per M | intercept s | peak RSS MB "
             "(driver / JVM) by size |", "|---|" + "---|" * (len(sizes) + 3)]
    readers = [k for k in doc["sizes"][0]["results"] if len(series(doc, k)) >= 2]
    for k in readers:
        pts = dict(series(doc, k))
        # a size beyond SCALE (run once) is shown, not fitted: the targets check it against
        # the line through the others
        fitted = [p for p in pts.items() if p[0] <= SCALE / MILLION]
        slope, intercept = fit(fitted if len(fitted) >= 2 else list(pts.items()))
        cells = " | ".join(f"{pts[n / MILLION]:.1f}" if n / MILLION in pts else "-"
                           for n in sizes)
        mems = []
        for s in doc["sizes"]:
            r = s["results"].get(k)
            if r:
                prog = [f"{v:.0f}" for v in (rss(r, DRIVER), rss(r, JVM)) if v]
                # a reader of one process (a, f): its largest program
                mems.append(" / ".join(prog) or f"{max(r['peak_rss_mb'].values(), default=0):.0f}")
        lines.append(f"| {label(k)} | {cells} | {slope:.2f} | {intercept:.1f} | "
                     f"{'; '.join(mems)} |")
    return lines


def floor_steps(size: dict[str, Any]) -> dict[str, tuple[int, list[float]]]:
    """The floor's steps (h) at one size: name -> (rows, the seconds of each run)."""
    steps: dict[str, tuple[int, list[float]]] = {}
    for t in size["results"].get("h_spark_floor", {}).get("timings") or []:
        for r in t["steps"]:
            steps.setdefault(r["step"], (r["rows"], []))[1].append(r["seconds"])
    return steps


def floor_fits(sizes: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """Each of the floor's steps (h) fitted through its medians at these sizes: (slope s per
    million, intercept s), where it ran at two of them at least."""
    per: dict[str, list[tuple[float, float]]] = {}
    for size in sizes:
        for name, (_, secs) in floor_steps(size).items():
            per.setdefault(name, []).append((size["records"] / MILLION,
                                             statistics.median(secs)))
    return {k: fit(v) for k, v in per.items() if len(v) >= 2}


def floor_slopes(doc: dict[str, Any]) -> list[str]:
    """Each of the floor's steps (h) as a line through its medians: which input, and the
    grouping, cost what per million records of the topic."""
    rows = floor_fits(doc["sizes"])
    if not rows:
        return []
    return ["| the floor's step | slope s per M | intercept s |", "|---|---|---|",
            *(f"| {k} | {slope:.2f} | {icpt:.2f} |" for k, (slope, icpt) in rows.items()),
            f"| all steps | {sum(x[0] for x in rows.values()):.2f} | "
            f"{sum(x[1] for x in rows.values()):.2f} |"]


def repeats_text(doc: dict[str, Any]) -> str:
    """How many measured runs each size's medians rest on (the larger sizes, which fit the
    slope, are often run once), read off d's runs."""
    per = [(s["records"], len(s["results"]["d_kafka_recon"].get("runs_s") or []))
           for s in doc["sizes"] if "d_kafka_recon" in s["results"]]
    if not per or len({n for _, n in per}) == 1:
        return f"{per[0][1] if per else doc['repeats']} run(s) per reader at each size"
    return "measured runs per reader: " + ", ".join(
        f"{n / MILLION:g}M {k}" for n, k in per)


def render(doc: dict[str, Any], fleets: dict[int, dict[str, Any]] | None = None
           ) -> list[str]:
    """The measured part of the page: the targets and the few tables a reader needs; the
    detail of every run stays in bench/results.json and bench/fleet*.json."""
    m = doc["machine"]
    out = ["# Performance", "",
           "Written by `make bench` (`python -m bench.run`, then `python -m bench.report`) and "
           "`make bench-fleet`: every reader on the same topic and tables in one run, repeats "
           "interleaved, on a shared and noisy machine, so compare ratios within a run, not "
           "across runs. Every run's detail (each reader's runs, peak memory, its steps) is "
           "in `bench/results.json` and `bench/fleet*.json`.", "",
           f"{m['cores']} cores, {m['memory_gb']} GiB, Python {m['python']}, {m['when']}; "
           f"masters {', '.join(doc['masters'])}; {repeats_text(doc)}; the "
           f"flow replays the topic {doc.get('replays', 2)} times.", "",
           "## Targets", "", "| target | figure | met | where the time went (when not met) |",
           "|---|---|---|---|"]
    for what, figure, met, cause in targets(doc, fleets):
        out.append(f"| {what} | {figure} | "
                   f"{'not measured' if met is None else 'yes' if met else '**no**'} | "
                   f"{cause if met is False else ''} |")
    if lines := small_window_table(doc):
        out += ["", "## A small window", "",
                f"A window of {SMALL:,} records (with its losses and copies, so every step "
                "runs), median seconds per step (`timings.json`):", "", *lines]
    if len([s for s in doc["sizes"] if s["records"] <= SCALE]) >= 2:
        out += ["", "## Scaling", "",
                "Median seconds at each size; slope and intercept from a least-squares line "
                "through the medians (seconds = intercept + slope x millions of records).", ""]
        out += scaling_table(doc)
        if lines := floor_slopes(doc):
            out += ["", "The floor's steps (h) one by one, each a line through its medians:",
                    "", *lines]
        for size in doc["sizes"]:
            if size.get("ratios"):
                out += ["", f"At {size['records']:,} records (records/s): " + ", ".join(
                    f"{k.replace('_over_', '/')} = {v}" for k, v in size["ratios"].items())]
    if lines := fleet_tables(fleets or {}):
        out += ["", "## A fleet", "",
                "Five-minute flows under Airflow's live scheduler, every Spark step through "
                "one warm Spark Connect server, fed by one process (`bench.feeder`); measured "
                "once every flow's first run had its verdict.", "", *lines]
    return out


def main(paths: list[str]) -> int:
    doc = json.loads(Path(paths[0]).read_text())
    fleets = {}
    for name in ("fleet.json", "fleet-50.json"):
        path = REPO_ROOT / "bench" / name
        if path.exists():
            got = json.loads(path.read_text())
            fleets[int(got["flows"])] = got
    target = REPO_ROOT / "docs" / "performance.md"
    target.parent.mkdir(exist_ok=True)
    existing = target.read_text() if target.exists() else ""
    marker = "<!-- measured -->"
    notes = existing.split(marker, 1)[1] if marker in existing else "\n"
    target.write_text("\n".join(render(doc, fleets)) + "\n\n" + marker + notes)
    print(target)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:] or [str(REPO_ROOT / "bench" / "results.json")]))
