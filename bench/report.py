"""Write docs/performance.md from the bench result files (bench/results*.json)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from kafka_recon.settings import REPO_ROOT

NAMES = {"a_kafka_consumer_perf": "a. Kafka ConsumerPerformance (bare read)",
         "b_plain_python": "b. plain confluent-kafka script + id diff",
         "c_kcat": "c. kcat read and count",
         "d_kafka_recon": "d. kafka-recon run (2 replays + reconcile, to result.json)",
         "e_quick_estimate": "e. quick offset estimate"}


def table(run: dict[str, Any]) -> list[str]:
    lines = ["| reader | median s | min-max s | records/s | peak RSS MB |", "|---|---|---|---|---|"]
    for key, label in NAMES.items():
        r = run["results"].get(key)
        if not r:
            continue
        s = r["seconds"]
        rss = ", ".join(f"{k} {v}" for k, v in sorted(r["peak_rss_mb"].items()) if v > 1)
        lines.append(f"| {label} | {s['median']} | {s['min']}-{s['max']} | "
                     f"{r['records_per_second']:,} | {rss} |")
    return lines


def main(paths: list[str]) -> int:
    runs = [{**json.loads(Path(p).read_text()), "file": Path(p).name} for p in sorted(paths)]
    out = ["# Performance", "",
           "Measured by `make bench` (`python -m bench.run`), every reader on the same topic in "
           "one run, on a shared and noisy machine: compare ratios within a run, not across runs.",
           ""]
    for run in runs:
        m = run["machine"]
        out += [f"## {run['records']:,} records, Spark `{m['master']}` ({run['file']})", "",
                f"{m['cores']} cores, {m['memory_gb']} GiB, Python {m['python']}, {m['when']}. "
                f"Data: {json.dumps(run['data'])}.", ""]
        out += table(run)
        if run.get("ratios"):
            out += ["", "Ratios (records/s): " + ", ".join(f"{k.replace('_over_', '/')} = {v}"
                                                          for k, v in run["ratios"].items())]
        if run["results"].get("same_answer"):
            out += ["", f"Same missing ids from b and d: {run['results']['same_answer']}"]
        out.append("")
    (REPO_ROOT / "docs").mkdir(exist_ok=True)
    target = REPO_ROOT / "docs" / "performance.md"
    existing = target.read_text() if target.exists() else ""
    marker = "<!-- measured -->"
    notes = existing.split(marker, 1)[1] if marker in existing else ""
    target.write_text("\n".join(out) + "\n" + marker + notes)
    print(target)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:] or sorted(str(p) for p in
                                                 (REPO_ROOT / "bench").glob("results*.json"))))
