"""`kafka-recon`: the same steps as the Airflow DAGs, from a shell.

    kafka-recon run --config FILE --flow NAME --start T --end T --out DIR [--replays N]

Exit codes (DESIGN.md): 0 status ok; 1 findings or inconclusive; 2 the run could not be made
(bad config or window, unreachable service); the message says what and where.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class UsageError(ValueError):
    pass


def _run(a: argparse.Namespace) -> int:
    from kafka_recon import pipeline
    from kafka_recon.config import load_flow
    from kafka_recon.paths import spark_jars
    from kafka_recon.reconcile import verdict
    from kafka_recon.sparkutil import session
    from kafka_recon.topic import check_topic
    from kafka_recon.window import Window
    from spark_jobs import reconcile as reconcile_job
    from spark_jobs import replay as replay_job

    flow = load_flow(a.config, a.flow)
    window = Window.parse(a.start, a.end, flow.grace)
    if window.start > datetime.now(UTC):
        raise UsageError(f"--start {a.start}: the window starts in the future")
    if a.replays is not None and not 1 <= a.replays <= 10:
        raise UsageError(f"--replays {a.replays}: expected 1 to 10")
    out: Path = a.out
    out.mkdir(parents=True, exist_ok=True)
    pipeline.stage(flow, window, out)
    check_topic(flow.topic_tier.bootstrap, flow.topic_tier.topic)  # before Spark starts
    spark = session(f"kafka-recon {flow.name}", master=a.master, jars=spark_jars())
    spark.sparkContext.setLogLevel("WARN")
    try:
        job_args = SimpleNamespace(config=a.config, flow=a.flow, start=a.start, end=a.end,
                                   out=out, replays=a.replays)
        replay_job.run(spark, job_args)  # type: ignore[arg-type]
        result = reconcile_job.run(spark, job_args)  # type: ignore[arg-type]
    finally:
        spark.stop()
    pipeline.report(out)
    print(verdict(result))
    print(f"result: {out / 'result.json'}")
    return EXIT_OK if result["status"] == "ok" else EXIT_FINDINGS


def main(argv: list[str] | None = None) -> int:
    from kafka_recon.config import ConfigError
    from kafka_recon.jdbc import JdbcError
    from kafka_recon.stage import SourceError
    from kafka_recon.topic import TopicError
    from kafka_recon.window import WindowError

    p = argparse.ArgumentParser(prog="kafka-recon", description="Find and locate lost Kafka "
                                "records, tier by tier.")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="reconcile one flow over one window")
    r.add_argument("--config", required=True, type=Path)
    r.add_argument("--flow", required=True)
    r.add_argument("--start", required=True, help="ISO 8601, e.g. 2026-11-20T00:00:00Z")
    r.add_argument("--end", required=True, help="ISO 8601, exclusive")
    r.add_argument("--out", required=True, type=Path, help="run folder (replaced on re-run)")
    r.add_argument("--replays", type=int, default=None)
    r.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    a = p.parse_args(argv)
    try:
        return _run(a)
    except (ConfigError, WindowError, SourceError, TopicError, JdbcError, UsageError) as exc:
        print(f"kafka-recon: {exc}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
