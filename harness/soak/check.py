"""The soaks' checker: one window of one flow against the truth of its pipeline.

The truth is read from the tables and the topic themselves (harness.drill.truth): every id the
upstream wrote in the window, every record of the window the topic holds (and which came late),
every id the sink loaded. A window matches when its verdict and every finding (kind, side, hop,
count, ids) are what a perfect detector reports; it may be `inconclusive` only when a fault
touched it and its reasons say why; it must never be `ok` while a step it depends on failed
(its journal, `steps/`); and every file of its run folder must name the run its result.json
names (`RunFile.run`): no run wrote into a window another held."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from harness.drill.runner import compare, found_findings
from harness.drill.truth import Truth, expected_findings, sql_ids, topic_ids
from harness.live import LivePipeline
from kafka_recon.result.model import Result
from kafka_recon.runfolder import RunFolder

WRITE_HOP = "orders_db->orders_topic"


def words(found: dict[Any, dict[str, Any]]) -> str:
    """Findings as `kind/side/hop count; ...`, or `none`."""
    return "; ".join(f"{k}/{s}/{h} {v['count']}" for (k, s, h), v in sorted(found.items())) \
        or "none"


def verdict_cell(row: dict[str, Any]) -> str:
    """A judged window's verdict for the soaks' tables: an inconclusive one with its reasons."""
    why = f" ({'; '.join(row.get('reasons') or [])})" if row["verdict"] == "inconclusive" \
        else ""
    return f"{row['verdict']}{why}"


def match_cell(row: dict[str, Any]) -> str:
    """Whether a judged window matched, with what differed."""
    extra = f" - {'; '.join(row['problems'])}" if row.get("problems") else ""
    return f"{row['match']}{extra}"


def failed_steps(out: Path) -> list[str]:
    """The steps the run folder's journal says failed (`steps/<step>.json`)."""
    steps = out / "steps"
    if not steps.is_dir():
        return []
    failed = []
    for entry in sorted(steps.glob("*.json")):
        doc = json.loads(entry.read_text())
        if doc.get("state") == "failed":
            failed.append(str(doc.get("step", entry.stem)))
    return failed


def mixed_runs(out: Path) -> list[str]:
    """Every JSON file of the run folder `out` (its own, the journal's, the staged tiers')
    that names another run than its result.json does, as `<file>: <run>`; a result that names
    no run, too (every run of a soak holds its window)."""
    result = out / "result.json"
    if not result.exists():
        return []
    owner = json.loads(result.read_text()).get("run")
    if owner is None:
        return ["result.json: no run named"]
    mixed = []
    for path in sorted([*out.glob("*.json"), *out.glob("steps/*.json"),
                        *out.glob("staged/*.json")]):
        run = json.loads(path.read_text()).get("run")
        if run != owner:
            mixed.append(f"{path.relative_to(out)}: {run}")
    return mixed


def judge_window(pipeline: LivePipeline, start: datetime, end: datetime, grace: timedelta,
                 out: Path, faults: Sequence[str]) -> dict[str, Any]:
    """One window (its run folder `out`): its verdict and findings against the truth of its
    pipeline's tiers; `faults`, the names of the faults that touched it. The row's `match` is
    `yes` or `no`, and `problems` says what differs."""
    p = pipeline
    topic, late = topic_ids(p.bootstrap, p.topic, start, end, end + grace)
    truth = Truth(upstream=sql_ids(str(p.upstream), "src", start, end), topic=topic,
                  late=late, sinks={"warehouse": sql_ids(str(p.sink), "dst", start, end)})
    expected = expected_findings(truth, WRITE_HOP, topic="orders_topic")["warehouse"]
    row: dict[str, Any] = {"faults": list(faults), "truth": words(expected),
                           "records": sum(truth.upstream.values())}
    result = RunFolder(out).read_if(Result)
    if result is None:
        return {**row, "verdict": "none", "findings": "no result.json", "match": "no",
                "problems": [f"no result in {out}"]}
    found = found_findings(result, out)
    row.update(verdict=result.status, findings=words(found), reasons=result.reasons)
    failed = failed_steps(out)
    mixed = mixed_runs(out)
    if result.status == "inconclusive":
        # honest only when a fault could have hidden part of the window, and it says why
        problems = [] if faults and result.reasons else \
            ["inconclusive without a fault touching the window"]
    else:
        problems = compare(expected, found)
        failing = any(k in ("loss", "duplicate", "unexpected") for k, _, _ in expected)
        if (result.status == "findings") != failing:
            problems.append(f"status {result.status}, truth {'findings' if failing else 'ok'}")
        if result.status == "ok" and failed:
            problems.append(f"ok while steps failed: {', '.join(failed)}")
    if mixed:
        problems.append(f"files of another run than result.json's ({result.run}): "
                        + ", ".join(mixed))
    return {**row, "match": "no" if problems else "yes", "problems": problems}
