"""Write docs/performance.md from bench/results.json (and bench/tune*.json when present).

The measured part is replaced on every run; the notes below the `<!-- measured -->` marker are
kept. The targets are issue 43's, each with its figure and whether this bench run met it.
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
    """The median of a server's runs after its first (which pays the JIT), when it had some."""
    runs = r.get("runs_s") or []
    return float(statistics.median(runs[1:])) if len(runs) >= 2 else None


def series(doc: dict[str, Any], reader: str) -> list[tuple[float, float]]:
    return [(s["records"] / MILLION, median(s["results"][reader])) for s in doc["sizes"]
            if reader in s["results"]]


def rss(result: dict[str, Any], program: str, kind: str = "peak_rss_mb") -> float | None:
    """A program's peak resident MB; kind "peak_anon_mb" its anonymous part (benches
    before 2026-11-29 did not measure it)."""
    value = result.get(kind, {}).get(program)
    return float(value) if value else None


def size_table(size: dict[str, Any]) -> list[str]:
    lines = ["| reader | median s | min-max s | records/s | peak RSS MB |",
             "|---|---|---|---|---|"]
    for key, r in size["results"].items():
        s = r["seconds"]
        mem = ", ".join(f"{k} {v}" for k, v in sorted(r["peak_rss_mb"].items()) if v > 5)
        lines.append(f"| {label(key)} | {s['median']} | {s['min']}-{s['max']} | "
                     f"{r['records_per_second']:,} | {mem} |")
    return lines


def step_table(size: dict[str, Any]) -> list[str]:
    """Median seconds per step (timings.json) of d and g: where the time went, before/after."""
    cols = [k for k in ("g_kafka_recon_before", "d_kafka_recon", CONNECT)
            if k in size["results"]]
    per: dict[str, dict[str, float]] = {}
    jobs: dict[str, str] = {}
    for k in cols:
        # read as a run reads its own timings.json: an older result's (the steps at the top,
        # version 0) upgraded to the typed file's `laps`
        runs = [Timings.parse(t, f"{k}'s timings") for t in size["results"][k].get("timings")
                or []]
        steps = sorted({s for t in runs for s in t.laps})
        per[k] = {s: statistics.median(t.laps[s] for t in runs if s in t.laps) for s in steps}
        counts = [t.spark_jobs["total"] for t in runs if t.spark_jobs]
        jobs[k] = str(int(statistics.median(counts))) if counts else "not counted"
    order = ["stage", "replay", "reconcile", "validate", "report"]
    steps = sorted({s for k in cols for s in per[k]},
                   key=lambda s: (order.index(s) if s in order else len(order), s))
    lines = ["| step | " + " | ".join(label(k).split(" (")[0] + (", Spark Connect"
                                                               if k == CONNECT else "")
                                      for k in cols) + " |",
             "|---|" + "---|" * len(cols)]
    for s in steps:
        lines.append(f"| {s} | " + " | ".join(f"{per[k][s]:.1f}" if s in per[k] else "-"
                                              for k in cols) + " |")
    lines.append("| Spark jobs | " + " | ".join(jobs[k] for k in cols) + " |")
    return lines


SCALE = 10 * MILLION  # the slope is fitted up to here; a size beyond is run once, to check it


def slope_series(doc: dict[str, Any], reader: str) -> list[tuple[float, float]]:
    """(millions, median seconds) of the sizes the slope is fitted through."""
    return [p for p in series(doc, reader) if p[0] <= SCALE / MILLION]


def targets(doc: dict[str, Any], fleet: dict[str, Any] | None = None
            ) -> list[tuple[str, str, bool | None]]:
    """Issue 43's targets: (target, figure, met); met is None when this run did not measure
    it. `fleet`: bench.fleet's result, when it ran."""
    sizes = doc["sizes"]
    by_n = {s["records"]: s for s in sizes}
    out: list[tuple[str, str, bool | None]] = []

    def d_over_f(n: int) -> float | None:
        r = by_n[n]["results"] if n in by_n else {}
        if "d_kafka_recon" not in r or "f_duckdb_script" not in r:
            return None
        return median(r["d_kafka_recon"]) / median(r["f_duckdb_script"])

    d_pts, h_pts = slope_series(doc, "d_kafka_recon"), slope_series(doc, "h_spark_floor")
    if len(d_pts) >= 2 and len(h_pts) >= 2:
        (d_slope, _), (h_slope, _) = fit(d_pts), fit(h_pts)
        out.append(("slope of d <= 1.6 x the floor h's slope",
                    f"{d_slope / h_slope:.2f} x ({d_slope:.2f} vs {h_slope:.2f} s/M)",
                    d_slope <= 1.6 * h_slope))
    else:
        out.append(("slope of d <= 1.6 x the floor h's slope", "needs d and h at two sizes",
                    None))
    for n, limit in ((MILLION, 1.2), (SCALE, 0.6)):
        x = d_over_f(n)
        out.append((f"at {n / MILLION:g}M, d <= {limit} x the DuckDB script (f)",
                    f"{x:.2f} x" if x is not None else "not run", x <= limit if x else None))
    beyond = [s for s in sizes if s["records"] > SCALE and "d_kafka_recon" in s["results"]]
    ten = by_n.get(SCALE, {}).get("results", {}).get("d_kafka_recon")
    if beyond and ten and len(d_pts) >= 2:
        big = beyond[-1]
        nb, r = big["records"] / MILLION, big["results"]["d_kafka_recon"]
        slope = fit(d_pts)[0]
        per_m = (median(r) - median(ten)) / (nb - SCALE / MILLION)
        out.append((f"at {nb:g}M (once), d's cost per million beyond 10M within 15% of its "
                    "1M-10M slope", f"{per_m:.2f} vs {slope:.2f} s/M "
                    f"({per_m / slope - 1:+.1%})", abs(per_m / slope - 1) <= 0.15))
        for program, limit, what in ((DRIVER, 0.10, "driver RSS flat (10%)"),
                                     (JVM, 0.25, "JVM peak within 25%")):
            lo, hi = rss(ten, program), rss(r, program)
            if lo and hi:
                # the verdict stays on the resident figure the target names; its anonymous
                # part is shown beside it, since the kernel can take an idle process's file
                # pages back and lower the resident figure alone
                lo_a, hi_a = rss(ten, program, "peak_anon_mb"), rss(r, program, "peak_anon_mb")
                anon = (f"; anonymous {lo_a:.0f} MB -> {hi_a:.0f} MB ({hi_a / lo_a - 1:+.1%})"
                        if lo_a and hi_a else "")
                out.append((f"at {nb:g}M, {what} of the 10M run's",
                            f"{lo:.0f} MB -> {hi:.0f} MB ({hi / lo - 1:+.1%}){anon}",
                            abs(hi / lo - 1) <= limit))
    elif failed := doc.get("failed"):
        # a size whose run failed is a target missed, never one left unmeasured
        out.append((f"at {failed['records'] / MILLION:g}M (once): cost per million, driver "
                    "RSS, JVM peak", f"the run failed: {failed['error'][:160]}", False))
    else:
        out.append(("at 50M (once): cost per million, driver RSS, JVM peak",
                    "not run in this bench", None))
    small, ten_size = by_n.get(MILLION), by_n.get(SCALE)
    if small and ten_size and "d_kafka_recon" in small["results"] and ten:
        lo, hi = rss(small["results"]["d_kafka_recon"], JVM), rss(ten, JVM)
        if lo and hi:
            out.append(("JVM peak within 25% from 1M to 10M, with a fixed heap chosen by the "
                        "window's size", f"{lo:.0f} MB -> {hi:.0f} MB ({hi / lo - 1:+.1%})",
                        abs(hi / lo - 1) <= 0.25))
    if fleet:
        p95 = fleet["verdict_after_grace_s"]["p95"]
        # measured from unpausing, or (since 2026-11-29) once every DAG's first run was done
        began = "" if fleet.get("warmup_s") is None else \
            f" (measured from {fleet['warmup_s']:.0f} s after unpausing, the first runs done)"
        out.append((f"a fleet: {fleet['flows']} flows on {fleet['window_minutes']}-minute "
                    f"windows for {fleet['minutes']} minutes, verdict p95 within 120 s of grace "
                    f"closing, none skipped",
                    f"p95 {p95:.0f} s, {fleet['skipped']} skipped{began}",
                    p95 <= 120 and fleet["skipped"] == 0))
    else:
        out.append(("a fleet: 20 flows on 5-minute windows under the live scheduler",
                    "not run (`make bench-fleet`)", None))
    floor = [s for s in sizes if floor_steps(s)]
    out.append(("the floor's steps, each measured", f"at {len(floor)} of {len(sizes)} sizes",
                len(floor) == len(sizes) if floor else None))
    same = [s["same_answer"].get("all_equal") for s in sizes if s.get("same_answer")]
    out.append(("every reader names the same ids as d, at every size",
                f"{sum(1 for x in same if x)} of {len(same)} sizes", all(same) if same
                else None))
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


def tune_table(tune: dict[str, Any]) -> list[str]:
    """One row per variant; the CPU seconds too when the tune measured them. Ratios are to
    `base`, or to the first variant when the tune ran none of that name."""
    variants = tune["variants"]
    ref = "base" if "base" in variants else next(iter(variants))
    base = variants[ref]
    cpu = all("median_cpu_s" in v for v in variants.values())

    def ratio(v: dict[str, Any], key: str) -> str:
        return f"{v[key] / base[key]:.2f}" if base.get(key) else "-"

    head = f"| variant | median s | runs s | ratio to {ref} |"
    lines = [head + (f" median CPU s | CPU ratio to {ref} |" if cpu else "") + " same ids |",
             "|---|---|---|---|" + ("---|---|" if cpu else "") + "---|"]
    for name, v in variants.items():
        cells = [name, str(v["median_s"]), ", ".join(map(str, v["seconds"])),
                 ratio(v, "median_s")]
        if cpu:
            cells += [str(round(v["median_cpu_s"], 2)), ratio(v, "median_cpu_s")]
        lines.append(f"| {' | '.join(cells)} | {tune['same_ids'].get(name)} |")
    return lines


def floor_steps(size: dict[str, Any]) -> dict[str, tuple[int, list[float]]]:
    """The floor's steps (h) at one size: name -> (rows, the seconds of each run)."""
    steps: dict[str, tuple[int, list[float]]] = {}
    for t in size["results"].get("h_spark_floor", {}).get("timings") or []:
        for r in t["steps"]:
            steps.setdefault(r["step"], (r["rows"], []))[1].append(r["seconds"])
    return steps


def floor_table(size: dict[str, Any]) -> list[str]:
    """Median seconds of each of the floor's steps (h), and its Spark start."""
    runs = size["results"].get("h_spark_floor", {}).get("timings") or []
    if not runs:
        return []
    start = statistics.median(t["spark_start_s"] for t in runs)
    return ["| step | median s |", "|---|---|", f"| Spark start | {start:.2f} |",
            *(f"| {name} ({rows:,} rows) | {statistics.median(secs):.2f} |"
              for name, (rows, secs) in floor_steps(size).items())]


def floor_slopes(doc: dict[str, Any]) -> list[str]:
    """Each of the floor's steps (h) as a line through its medians: which input, and the
    grouping, cost what per million records of the topic."""
    per: dict[str, list[tuple[float, float]]] = {}
    for size in doc["sizes"]:
        for name, (_, secs) in floor_steps(size).items():
            per.setdefault(name, []).append((size["records"] / MILLION,
                                             statistics.median(secs)))
    rows = {k: fit(v) for k, v in per.items() if len(v) >= 2}
    if not rows:
        return []
    return ["| the floor's step | slope s per M | intercept s |", "|---|---|---|",
            *(f"| {k} | {slope:.2f} | {icpt:.2f} |" for k, (slope, icpt) in rows.items()),
            f"| all steps | {sum(x[0] for x in rows.values()):.2f} | "
            f"{sum(x[1] for x in rows.values()):.2f} |"]


def render(doc: dict[str, Any], tunes: dict[str, dict[str, Any]] | None = None,
           fleet: dict[str, Any] | None = None) -> list[str]:
    """The measured part of the page; `tunes`: bench.tune's results by file name; `fleet`:
    bench.fleet's."""
    m = doc["machine"]
    out = ["# Performance", "",
           "Written by `make bench` (`python -m bench.run`, then `python -m bench.report`): "
           "every reader on the same topic and tables in one run, repeats interleaved, on a "
           "shared and noisy machine, so compare ratios within a run, not across runs.", "",
           f"{m['cores']} cores, {m['memory_gb']} GiB, Python {m['python']}, {m['when']}; "
           f"masters {', '.join(doc['masters'])}; {doc['repeats']} repeat(s) per reader; the "
           f"flow replays the topic {doc.get('replays', 2)} times"
           + (f"; g is the code at {doc['before']}" if doc.get("before") else "") + ".", "",
           "## Targets", "", "| target | figure | met |", "|---|---|---|"]
    for what, figure, met in targets(doc, fleet):
        out.append(f"| {what} | {figure} | "
                   f"{'not measured' if met is None else 'yes' if met else '**no**'} |")
    if len(doc["sizes"]) >= 2:
        out += ["", "## Scaling", "",
                "Median seconds at each size; slope and intercept from a least-squares line "
                "through the medians (seconds = intercept + slope x millions of records).", ""]
        out += scaling_table(doc)
        if lines := floor_slopes(doc):
            out += ["", "The floor's steps (h) one by one, each a line through its medians:",
                    "", *lines]
    for size in doc["sizes"]:
        out += ["", f"## {size['records']:,} records", "",
                f"Data: {json.dumps(size['data'])}.", ""]
        out += size_table(size)
        if size.get("ratios"):
            out += ["", "Ratios (records/s): " + ", ".join(
                f"{k.replace('_over_', '/')} = {v}" for k, v in size["ratios"].items())]
        if size.get("same_answer"):
            out += ["", "Same ids as d: " + ", ".join(
                f"{k} {'yes' if v['equal'] else 'NO: ' + ', '.join(v['differ'])}"
                for k, v in size["same_answer"].items() if isinstance(v, dict))]
        if any("timings" in r for r in size["results"].values()):
            out += ["", "Where d's time went, median seconds per step (its `timings.json`):",
                    ""]
            out += step_table(size)
        if lines := floor_table(size):
            out += ["", "What the floor (h) spent on each step, median seconds:", "", *lines]
    for name, tune in (tunes or {}).items():
        out += ["", f"## Settings tried: {', '.join(tune['variants'])} ({tune['records']:,} "
                    f"records, {tune['master']}, `python -m bench.tune`, {tune['when']}, "
                    f"`bench/{name}`)", ""]
        out += tune_table(tune)
        if tune.get("note"):
            out += ["", tune["note"]]
    return out


def main(paths: list[str]) -> int:
    doc = json.loads(Path(paths[0]).read_text())
    tunes = {p.name: json.loads(p.read_text())
             for p in sorted((REPO_ROOT / "bench").glob("tune*.json"))}
    fleet_file = REPO_ROOT / "bench" / "fleet.json"
    fleet = json.loads(fleet_file.read_text()) if fleet_file.exists() else None
    target = REPO_ROOT / "docs" / "performance.md"
    target.parent.mkdir(exist_ok=True)
    existing = target.read_text() if target.exists() else ""
    marker = "<!-- measured -->"
    notes = existing.split(marker, 1)[1] if marker in existing else "\n"
    target.write_text("\n".join(render(doc, tunes, fleet)) + "\n\n" + marker + notes)
    print(target)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:] or [str(REPO_ROOT / "bench" / "results.json")]))
