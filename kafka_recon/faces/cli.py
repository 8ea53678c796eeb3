"""`kafka-recon`: the same steps as the Airflow DAGs, from a shell.

    kafka-recon run --config FILE --flow NAME --start T --end T --out DIR [--replays N]
                    [--master M | --remote sc://host:port]
    kafka-recon repair plan|deliver --config FILE --flow NAME --start T --end T --out DIR
                    [--plan DIGEST]                      (the lost records, read back, re-sent)
    kafka-recon snapshot --config FILE [--flow NAME]     (Flume counters and flight recorder)
    kafka-recon audit --config FILE [--flow NAME]        (exit 1 when a high-severity rule fires)
    kafka-recon check [--config FILE] [--flow NAME]      (could each flow run? what it would read)
    kafka-recon seed-history --config FILE [--flow NAME] [--days 28]  (volume history, no replay)
    kafka-recon class-archive [--out FILE]               (the Spark driver's class archive)
    kafka-recon spark-server [--port N]                  (a warm Spark for runs with --remote)

Exit codes (docs/design.md, `kafka_recon.errors`): 0 status ok; 1 findings or inconclusive; 2 the
run could not be made (bad config or window, missing jars), a source could not be read (the run
folder then holds an inconclusive result naming it), or a step failed; one line says what and
where.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from kafka_recon.errors import (
    EXIT_ERROR,
    EXIT_FINDINGS,
    EXIT_OK,
    ReconError,
    SourceUnreadable,
    StepFailed,
    StoreUnreachable,
    UsageError,
    one_line,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from kafka_recon.config import Flow


# Spark's own log, once a command's session has started: a failed task logs its whole Java
# stack and Python traceback, where a command says one line (what failed is in that line and
# in the run's result); Spark's UI and event log keep the rest
SPARK_LOG_LEVEL = "FATAL"


def _run(a: argparse.Namespace) -> int:
    from kafka_recon import orchestrate
    from kafka_recon.settings import jvm_options, spark_jars, spark_remote
    from kafka_recon.spark.session import session

    run = orchestrate.load(a.flow, a.start, a.end, a.config, a.out)
    if run.window.start > datetime.now(UTC):
        raise UsageError(f"--start {a.start}: the window starts in the future")
    if a.replays is not None and not 1 <= a.replays <= 10:
        raise UsageError(f"--replays {a.replays}: expected 1 to 10")
    remote = spark_remote(a.remote)  # a bad URL: a CannotRun before anything is written
    if remote and a.master is not None:
        raise UsageError("--master and --remote: a run uses its own Spark or a Spark Connect "
                         "server's, not both")
    # missing jars or a bad KAFKA_RECON_JVM_OPTIONS: a CannotRun before anything is written
    # the jars follow the run folder actually used: `--out s3://...` with a local runs root
    # needs S3A as much as a runs root in S3 does
    jars = [] if remote else spark_jars(lake=bool(run.flow.table_tiers),
                                        objects=not run.folder.local)
    if not remote:
        jvm_options()

    def spark() -> SparkSession:
        # called after staging: the window's size is known, and sizes the driver
        s = session(f"kafka-recon {run.flow.name}", master=a.master or "local[*]", jars=jars,
                    remote=remote, given=run.flow.spark_settings,
                    records=orchestrate.staged_size(run))
        if not remote:
            s.sparkContext.setLogLevel(SPARK_LOG_LEVEL)
        return s

    try:
        result = orchestrate.execute(run, spark, a.replays)
    except StoreUnreachable as exc:
        # no result can be written where the run's folder is: the verdict is said here only,
        # and the folder, without a result, reads as a run that did not finish
        window = run.window.as_json()
        print(f"{run.flow.name} {window['start']}..{window['end']}: INCONCLUSIVE - {exc}")
        raise
    except (SourceUnreadable, StepFailed) as exc:
        # the run folder holds an inconclusive result and report naming what failed
        print(orchestrate.conclude(run).verdict())
        print(f"result: {run.folder.result}")
        raise exc
    print(result.verdict())
    print(f"result: {run.folder.result}")
    return EXIT_OK if result.status == "ok" else EXIT_FINDINGS


def _repair(a: argparse.Namespace) -> int:
    """`repair plan`: the window's lost records read back from where they still are;
    `repair deliver --plan DIGEST`: that plan's records published to the repair topics."""
    from kafka_recon import orchestrate
    from kafka_recon.settings import jvm_options, spark_jars
    from kafka_recon.spark.session import session

    run = orchestrate.load(a.flow, a.start, a.end, a.config, a.out)
    jars = spark_jars(lake=bool(run.flow.table_tiers), objects=not run.folder.local)
    jvm_options()

    def spark() -> SparkSession:
        s = session(f"kafka-recon repair plan {run.flow.name}", master=a.master or "local[*]",
                    jars=jars, given=run.flow.spark_settings)
        s.sparkContext.setLogLevel(SPARK_LOG_LEVEL)
        return s

    if a.action == "deliver":
        if not a.plan:
            raise UsageError("repair deliver: --plan DIGEST names the plan that was approved")
        delivery = orchestrate.deliver_repair(run, spark, a.plan)
        for d in delivery.hops:
            print(f"{d.hop}: " + (f"{d.sent} record(s) published to '{d.target}', {d.already} "
                                  "delivered before" if d.target else f"not published: {d.note}"))
        print(f"delivered plan {delivery.plan_digest}: {run.folder.file('repair_delivery')}")
        return EXIT_OK
    plan = orchestrate.plan_repair(run, spark)
    for h in plan.hops:
        sample = ", ".join(h.sample_ids) + (", ..." if h.records > len(h.sample_ids) else "")
        print(f"{h.hop} ({h.side} side): {h.lost} lost; {h.records} record(s) from the "
              f"{h.source} '{h.from_tier}' ({h.bytes} bytes){f': {sample}' if sample else ''}; "
              f"{h.uncovered} cannot be re-delivered")
    print(f"plan {plan.digest}: {run.folder.file('repair_plan')}")
    return EXIT_OK


def _selected_flows(a: argparse.Namespace) -> tuple[dict[str, Flow], int]:
    """The flow --flow names (read alone: another flow's mistake is not its error), or every
    valid flow of the config, each bad one named on stderr; and how many were bad. A config
    that cannot be read at all is an error."""
    from kafka_recon.config import load_flow, load_flows_partial

    if a.flow:
        return {a.flow: load_flow(a.config, a.flow)}, 0
    flows, errors = load_flows_partial(a.config)
    if "(file)" in errors:
        raise errors["(file)"]
    for name, error in sorted(errors.items()):
        print(f"kafka-recon: flow '{name}' skipped: {one_line(error)}", file=sys.stderr)
    return flows, len(errors)


def _snapshot(a: argparse.Namespace) -> int:
    from kafka_recon.cluster.snapshots import take_snapshots
    from kafka_recon.sources.connections import where
    from kafka_recon.stores.snapshots import snapshots_url

    flows, bad = _selected_flows(a)
    url = snapshots_url(a.store)
    taken, errors = take_snapshots(flows, url)
    for t in taken:
        if "tier" in t:
            print(f"{t['taken_at']} {t['flow']}/{t['tier']}: accepted {t['accepted']}, "
                  f"drained {t['drained']}")
        else:
            print(f"{t['taken_at']} {t['flow']}/{t['topic']}: {t['partitions']} partition(s), "
                  f"{t['groups']} group(s)")
    print(f"{len(taken)} snapshot(s) kept in the {where(url)}")
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    return EXIT_ERROR if errors or bad else EXIT_OK


def _seed_history(a: argparse.Namespace) -> int:
    from kafka_recon.orchestrate import seed_history

    if a.days < 7:
        raise UsageError("--days: a band needs at least 7 days of the same bucket; give 7 or "
                         "more")
    flows, bad = _selected_flows(a)
    for flow in flows.values():
        for line in seed_history(flow, a.days):
            print(f"{flow.name}/{line}")
    return EXIT_ERROR if bad else EXIT_OK


def _audit(a: argparse.Namespace) -> int:
    from kafka_recon.cluster.audit import audit_flow

    flows, bad = _selected_flows(a)
    high = 0
    print(f"{'flow':<16} {'severity':<8} {'rule':<22} {'where':<14} observed -> recommended")
    for flow in flows.values():
        found = audit_flow(flow, a.config.parent).risks
        for f in found:
            print(f"{flow.name:<16} {f.severity:<8} {f.rule:<22} {f.where:<14} "
                  f"{f.observed} -> {f.recommended}")
            print(f"{'':<16} fix: {f.fix} (seed {f.seed})")
        if not found:
            print(f"{flow.name:<16} no risk found on topic '{flow.topic_tier.topic}'")
        high += sum(f.severity == "high" for f in found)
    return EXIT_ERROR if bad else EXIT_FINDINGS if high else EXIT_OK


def _check(a: argparse.Namespace) -> int:
    import json

    from kafka_recon.faces.check import (
        as_json,
        check_config,
        check_stores,
        render,
        summary,
        window_of,
    )
    from kafka_recon.settings import config_where, existing_config

    config = a.config or existing_config("; give --config FILE")
    window = window_of(a.start, a.end)
    stores = check_stores()
    if not a.json:
        print("\n".join(render(stores)), flush=True)
    checks = []
    for c in check_config(config, a.flow, window):
        checks.append(c)
        if not a.json:
            print("\n".join(render(c)), flush=True)
    where = f"{config}" if a.config else config_where()
    if a.json:
        print(json.dumps({"config": str(config), "flows": as_json(checks),
                          "stores": {"answer": stores.could_run, "lines": stores.lines,
                                     "errors": stores.errors}}, indent=2))
    else:
        print("\n".join(summary(checks, where)))
    could = checks and all(c.could_run for c in checks) and stores.could_run
    return EXIT_OK if could else EXIT_ERROR


def _class_archive(a: argparse.Namespace) -> int:
    from kafka_recon.settings import class_archive_path, jvm_options, spark_jars
    from kafka_recon.spark.classes import build

    target = a.out or class_archive_path()
    if target is None:
        raise UsageError("KAFKA_RECON_CLASS_ARCHIVE is empty (no archive): give --out FILE")
    spark_jars()  # missing jars: a CannotRun, before a training run that would fail on them
    jvm_options()
    print(f"class archive: {build(target, a.master)}")
    return EXIT_OK


def _spark_server(a: argparse.Namespace) -> int:
    import os

    from kafka_recon.spark.server import server_command

    if not 0 < a.port < 65536:
        raise UsageError(f"--port {a.port}: expected 1 to 65535")
    argv, env = server_command(a.master, a.host, a.port)  # missing jars: a CannotRun
    print(f"kafka-recon spark-server: runs reach it with --remote sc://{a.host}:{a.port}",
          flush=True)
    os.execve(argv[0], argv, env)  # the server is this process: a supervisor can stop it
    return EXIT_ERROR  # not reached


def _service_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The commands that serve runs rather than make them: the class archive, the Spark
    Connect server."""
    from kafka_recon.spark.conf import CONNECT_PORT

    c = sub.add_parser("class-archive", help="make the Spark driver's class archive, which "
                       "starts every later run's Spark sooner (kafka_recon.spark.classes)")
    c.add_argument("--out", type=Path, help="where (default $KAFKA_RECON_CLASS_ARCHIVE, else "
                   "spark-classes.jsa among the jars)")
    c.add_argument("--master", default="local[2]", help="the training run's Spark master")
    sv = sub.add_parser("spark-server", help="run a Spark Connect server with kafka-recon's "
                        "jars and settings, for runs with --remote (kafka_recon.spark.server)")
    sv.add_argument("--master", default="local[*]", help="its Spark master (default local[*])")
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (default "
                    "loopback: sessions send it the flows' credentials)")
    sv.add_argument("--port", type=int, default=CONNECT_PORT,
                    help=f"port (default {CONNECT_PORT})")


def main(argv: list[str] | None = None) -> int:
    from kafka_recon.settings import use_cli_defaults

    p = argparse.ArgumentParser(prog="kafka-recon", description="Find and locate lost Kafka "
                                "records, tier by tier.")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="reconcile one flow over one window")
    r.add_argument("--config", required=True, type=Path)
    r.add_argument("--flow", required=True)
    r.add_argument("--start", required=True, help="ISO 8601, e.g. 2026-11-20T00:00:00Z")
    r.add_argument("--end", required=True, help="ISO 8601, exclusive")
    r.add_argument("--out", required=True,
                   help="run folder (replaced on re-run): a folder, or s3://[conn@]bucket/prefix")
    r.add_argument("--replays", type=int, default=None)
    r.add_argument("--master", help="Spark master of the run's own Spark (default local[*])")
    r.add_argument("--remote", help="a Spark Connect server instead, sc://host:port (default "
                   "$KAFKA_RECON_SPARK_REMOTE; see spark-server)")
    rp = sub.add_parser("repair", help="plan the re-delivery of a window's lost records "
                        "(kafka_recon.spark.repair)")
    rp.add_argument("action", choices=["plan", "deliver"], help="plan: read every lost "
                    "record back from where it still is into the run folder's repair/; "
                    "deliver: publish the plan's records to each topic's repair topic")
    rp.add_argument("--plan", help="deliver: the approved plan's digest (12 characters or more)")
    rp.add_argument("--config", required=True, type=Path)
    rp.add_argument("--flow", required=True)
    rp.add_argument("--start", required=True, help="ISO 8601, the run's window")
    rp.add_argument("--end", required=True, help="ISO 8601, exclusive")
    rp.add_argument("--out", required=True, help="the run's folder")
    rp.add_argument("--master", help="Spark master (default local[*])")
    s = sub.add_parser("snapshot", help="snapshot every Flume tier's counters and each topic's "
                       "partitions and groups (the flight recorder)")
    s.add_argument("--config", required=True, type=Path)
    s.add_argument("--flow", help="only this flow")
    s.add_argument("--store", help="the snapshot store: an SQLite file or an SQLAlchemy URL "
                   "(default: KAFKA_RECON_SNAPSHOTS, else the store, else <runs>/snapshots.db)")
    sh = sub.add_parser("seed-history", help="count each tier per bucket over past days, "
                        "without a replay, as the history a flow's volume is judged by")
    sh.add_argument("--config", required=True, type=Path)
    sh.add_argument("--flow", help="only this flow")
    sh.add_argument("--days", type=int, default=28, help="days of whole windows before the "
                    "last closed one (default 28)")
    au = sub.add_parser("audit", help="check each flow's cluster, topic and clients for risks")
    au.add_argument("--config", required=True, type=Path)
    au.add_argument("--flow", help="only this flow")
    ck = sub.add_parser("check", help="validate the flow config, resolve its connections, "
                        "run the preflight and show what a run would read, without Spark "
                        "(exit 0 only if every flow could run)")
    ck.add_argument("--config", type=Path, help="flow config (default: $KAFKA_RECON_CONFIG, "
                    "[kafka_recon] config, else flows.yaml in the current directory)")
    ck.add_argument("--flow", help="only this flow")
    ck.add_argument("--start", help="window start (default: each flow's last closed window)")
    ck.add_argument("--end", help="window end, with --start")
    ck.add_argument("--json", action="store_true", help="the answers as JSON")
    _service_commands(sub)
    a = p.parse_args(argv)
    use_cli_defaults()  # the command's paths default under the current directory
    try:
        return {"run": _run, "repair": _repair, "snapshot": _snapshot, "audit": _audit,
                "seed-history": _seed_history,
                "check": _check, "class-archive": _class_archive,
                "spark-server": _spark_server}[a.command](a)
    except ReconError as exc:
        print(f"kafka-recon: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("kafka-recon: interrupted", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:  # a bug or a library's error: one line, never the findings code
        print(f"kafka-recon: {a.command} failed: {one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
