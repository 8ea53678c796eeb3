"""Write docs/performance.md from bench/results.json (and bench/tune*.json when present).

The measured part is replaced on every run; the notes below the `<!-- measured -->` marker are
kept. The targets are issue 15's, each with its figure and whether this bench run met it.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from kafka_recon.settings import REPO_ROOT

NAMES = {"a_kafka_consumer_perf": "a. Kafka ConsumerPerformance (bare read)",
         "b_plain_python": "b. plain confluent-kafka script, one hop's missing ids",
         "c_kcat": "c. kcat read and count",
         "d_kafka_recon": "d. kafka-recon run (2 replays + reconcile, to result.json)",
         "e_quick_estimate": "e. quick offset estimate",
         "f_duckdb_script": "f. confluent-kafka twice + DuckDB, the full answer",
         "g_kafka_recon_before": "g. kafka-recon before issue 15 (worktree)",
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


def rss(result: dict[str, Any], program: str) -> float | None:
    value = result["peak_rss_mb"].get(program)
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
        runs = size["results"][k].get("timings") or []
        steps = sorted({s for t in runs for s, v in t.items() if isinstance(v, int | float)})
        per[k] = {s: statistics.median(t[s] for t in runs if s in t) for s in steps}
        counts = [t["spark_jobs"]["total"] for t in runs if "spark_jobs" in t]
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


def targets(doc: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    """Issue 15's targets: (target, figure, met); met is None when this run did not measure it."""
    sizes = doc["sizes"]
    small, large = sizes[0], sizes[-1]
    replays = doc.get("replays", 2)
    out: list[tuple[str, str, bool | None]] = []

    def ratio(size: dict[str, Any], other: str) -> float | None:
        r = size["results"]
        return median(r["d_kafka_recon"]) / median(r[other]) if other in r else None

    n1 = f"{small['records'] / MILLION:g}M"
    g = ratio(small, "g_kafka_recon_before")
    out.append((f"at {n1}, d <= 0.55 x the code before (g)",
                f"{g:.2f} x" if g else "g not run", g <= 0.55 if g else None))
    f = ratio(small, "f_duckdb_script")
    out.append((f"at {n1}, d <= 1.7 x the DuckDB script (f)",
                f"{f:.2f} x" if f else "f not run", f <= 1.7 if f else None))
    served = warm_seconds(small["results"].get(CONNECT, {}))
    if served is not None:
        runs = small["results"][CONNECT]["runs_s"]
        what = (f"d through one Spark Connect server, median of its runs after the first "
                f"({len(runs) - 1}; the first {runs[0]:.1f} s)")
        for other, limit, name in (("g_kafka_recon_before", 0.55, "the code before (g)"),
                                   ("f_duckdb_script", 1.7, "the DuckDB script (f)")):
            if other in small["results"]:
                x = served / median(small["results"][other])
                out.append((f"at {n1}, {what} <= {limit} x {name}",
                            f"{x:.2f} x ({served:.1f} s)", x <= limit))
    d_pts, a_pts = series(doc, "d_kafka_recon"), series(doc, "a_kafka_consumer_perf")
    if len(d_pts) >= 2 and len(a_pts) >= 2:
        (d_slope, _), (a_slope, _) = fit(d_pts), fit(a_pts)
        bound = 2.5 * a_slope * replays
        h_pts = series(doc, "h_spark_floor")
        # the least work of any run in Spark (the reads, one grouping): no run has a lower slope
        floor = f"; h, the floor: {fit(h_pts)[0]:.2f} s/M" if len(h_pts) >= 2 else ""
        out.append((f"slope of d <= 2.5 x ConsumerPerformance's slope x {replays} replays",
                    f"{d_slope:.2f} s/M against {bound:.2f} s/M (a: {a_slope:.2f} s/M{floor})",
                    d_slope <= bound))
    else:
        out.append(("slope of d <= 2.5 x ConsumerPerformance's x replays",
                    "needs a and d at two sizes or more", None))
    nl = f"{large['records'] / MILLION:g}M"
    fl = ratio(large, "f_duckdb_script") if large is not small else None
    out.append((f"at the largest size ({nl}), d <= 1.2 x the DuckDB script",
                f"{fl:.2f} x" if fl else "one size only, or f not run",
                fl <= 1.2 if fl else None))
    if large is not small and "d_kafka_recon" in large["results"]:
        a, b = small["results"]["d_kafka_recon"], large["results"]["d_kafka_recon"]
        for program, limit, what in ((DRIVER, 0.10, "Python driver"), (JVM, 0.25, "JVM")):
            lo, hi = rss(a, program), rss(b, program)
            if lo and hi:
                change = hi / lo - 1
                out.append((f"{what} peak RSS within {limit:.0%} from {n1} to {nl}",
                            f"{lo:.0f} MB -> {hi:.0f} MB ({change:+.1%})",
                            abs(change) <= limit))
    # the aim of "fewer than 15 Spark jobs per run", from d's timings.json at every size
    jobs = [t["spark_jobs"]["total"] for s in sizes
            for t in s["results"].get("d_kafka_recon", {}).get("timings") or []
            if "spark_jobs" in t]
    out.append(("Spark jobs per run of d < 15 (the aim), at every size",
                f"{max(jobs)} at most ({len(jobs)} runs)" if jobs else "not counted",
                max(jobs) < 15 if jobs else None))
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
        slope, intercept = fit(list(pts.items()))
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
            cells += [str(v["median_cpu_s"]), ratio(v, "median_cpu_s")]
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


def render(doc: dict[str, Any], tunes: dict[str, dict[str, Any]] | None = None
           ) -> list[str]:
    """The measured part of the page; `tunes`: bench.tune's results by file name."""
    m = doc["machine"]
    out = ["# Performance", "",
           "Written by `make bench` (`python -m bench.run`, then `python -m bench.report`): "
           "every reader on the same topic and tables in one run, repeats interleaved, on a "
           "shared and noisy machine, so compare ratios within a run, not across runs.", "",
           f"{m['cores']} cores, {m['memory_gb']} GiB, Python {m['python']}, {m['when']}; "
           f"masters {', '.join(doc['masters'])}; {doc['repeats']} repeat(s) per reader; the "
           f"flow replays the topic {doc.get('replays', 2)} times.", "",
           "## Targets", "", "| target | figure | met |", "|---|---|---|"]
    for what, figure, met in targets(doc):
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
    target = REPO_ROOT / "docs" / "performance.md"
    target.parent.mkdir(exist_ok=True)
    existing = target.read_text() if target.exists() else ""
    marker = "<!-- measured -->"
    notes = existing.split(marker, 1)[1] if marker in existing else "\n"
    target.write_text("\n".join(render(doc, tunes)) + "\n\n" + marker + notes)
    print(target)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:] or [str(REPO_ROOT / "bench" / "results.json")]))
