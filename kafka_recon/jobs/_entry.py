"""What the spark-submit entry points share: the arguments, and the call into the package."""

from __future__ import annotations

import sys
from argparse import ArgumentParser
from pathlib import Path


def main(step: str, description: str, argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog=step, description=description)
    p.add_argument("--config", required=True, type=Path, help="flow config YAML")
    p.add_argument("--flow", required=True, help="flow name in the config")
    p.add_argument("--start", required=True, help="window start, ISO 8601")
    p.add_argument("--end", required=True, help="window end, ISO 8601")
    # text, not a Path: an object store's folder (s3://...) is not a local path
    p.add_argument("--out", required=True, help="the run folder")
    if step in ("replay", "replay_reconcile"):
        p.add_argument("--replays", type=int, default=None,
                       help="override the flow's replay count")
    if step == "repair_deliver":
        p.add_argument("--plan", required=True, help="the approved plan's digest")
    a = p.parse_args(sys.argv[1:] if argv is None else argv)

    from kafka_recon.errors import EXIT_ERROR, ReconError
    from kafka_recon.orchestrate import load, spark_step
    from kafka_recon.settings import run_owner

    try:
        run = load(a.flow, a.start, a.end, a.config, a.out)
        summary = spark_step(step, run, getattr(a, "replays", None), run_owner(),
                             plan=getattr(a, "plan", None))
    except ReconError as exc:  # already journalled, and the result says so
        print(f"kafka-recon {step}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    print(summary)
    return 0
