"""The tasks of one reconciliation run, wired inside the DAG being defined.

The daily DAG (one per flow, window = data interval) and the ad-hoc DAG (flow and window from the
trigger form) run the same steps; they differ only in where flow, window and options come from,
which are Jinja templates rendered when each task runs. Task bodies import the pipeline lazily:
parsing a DAG file stays free of I/O and of pyspark, pandas and great_expectations.

    stage__<tier> (one per SQL/Flume tier) >> stage_topic >> replay >> reconcile >> validate
      >> report (all done) >> [history, notify] (all done) >> verdict (all done)
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import TriggerRule, task

from kafka_recon.paths import REPO_ROOT
from kafka_recon.sparkutil import SMALL_DATA_CONF, UTC_CONF


@dataclass(frozen=True)
class RunArgs:
    """Templates (or literals) for what one run reconciles."""
    flow: str
    start: str
    end: str
    config: str
    replays: str | None = None  # None: the flow's own replay count
    email: str = "True"


def spark_jars() -> str:
    """A user macro: listing .jars is I/O, so it happens when a task renders, not at parse."""
    from kafka_recon.paths import spark_jars as jars

    return ",".join(jars())


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes")


def spark_job(step: str, args: RunArgs) -> SparkSubmitOperator:
    app_args = ["--config", args.config, "--flow", args.flow, "--start", args.start,
                "--end", args.end, "--out", "{{ ti.xcom_pull(task_ids='stage_topic') }}"]
    if args.replays is not None and step == "replay":
        app_args += ["--replays", args.replays]
    return SparkSubmitOperator(
        task_id=step,
        conn_id="spark_default",
        application=str(REPO_ROOT / "spark_jobs" / f"{step}.py"),
        name=f"kafka-recon-{step}-{args.flow}",
        jars="{{ kafka_recon_spark_jars() }}",
        conf={**UTC_CONF, **SMALL_DATA_CONF},
        env_vars={"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable},
        application_args=app_args,
    )


@task
def stage_tier(flow: str, tier: str, start: str, end: str) -> str:
    from kafka_recon import pipeline

    f, window, out = pipeline.load(flow, start, end)
    pipeline.stage_tier(f, tier, window, out)
    return tier


@task(trigger_rule=TriggerRule.NONE_FAILED)
def stage_topic(flow: str, start: str, end: str) -> str:
    from kafka_recon import pipeline

    f, window, out = pipeline.load(flow, start, end)
    pipeline.stage_topic(f, window, out)
    return str(out)


@task
def validate(flow: str, start: str, end: str) -> bool:
    from kafka_recon import pipeline

    f, _, out = pipeline.load(flow, start, end)
    summary = pipeline.validate(f, out)
    if not summary["success"]:
        failed = {k: v["failed"] for k, v in summary["suites"].items() if v["failed"]}
        raise RuntimeError(f"Great Expectations validation failed: {failed}")
    return True


@task(trigger_rule=TriggerRule.ALL_DONE)
def report(flow: str, start: str, end: str) -> dict[str, str]:
    from kafka_recon import pipeline

    _, _, out = pipeline.load(flow, start, end)
    return pipeline.report(out)


@task(trigger_rule=TriggerRule.ALL_DONE)
def history(flow: str, start: str, end: str) -> dict[str, int]:
    from kafka_recon import pipeline

    _, _, out = pipeline.load(flow, start, end)
    return pipeline.record_history(out)


@task(trigger_rule=TriggerRule.ALL_DONE)
def notify(flow: str, start: str, end: str, email: str) -> str:
    from airflow.exceptions import AirflowSkipException

    from kafka_recon import pipeline

    if not _truthy(email):
        raise AirflowSkipException("email was turned off for this run")
    f, _, out = pipeline.load(flow, start, end)
    return pipeline.notify(f, out)


@task(trigger_rule=TriggerRule.ALL_DONE)
def verdict(flow: str, start: str, end: str) -> str:
    """Ends the run red when the flow is not ok, after owners have been told."""
    from kafka_recon import pipeline
    from kafka_recon.reconcile import verdict as one_line
    from kafka_recon.report import load_json

    _, _, out = pipeline.load(flow, start, end)
    result = load_json(out / "result.json")
    line = one_line(result)
    if result["status"] != "ok":
        raise RuntimeError(line)  # the reasons of an inconclusive run are in this line
    return line


def wire_run(args: RunArgs, staged: Any) -> None:
    """Everything after staging; `staged` is the task(s) that staged the upstream tiers."""
    w = {"flow": args.flow, "start": args.start, "end": args.end}
    topic = stage_topic(**w)
    replay, reconciled = spark_job("replay", args), spark_job("reconcile", args)
    reported = report(**w)
    recorded = history(**w)
    notified = notify(**w, email=args.email)
    staged >> topic >> replay >> reconciled >> validate(**w) >> reported
    reported >> [recorded, notified] >> verdict(**w)


def daily_run(args: RunArgs, tiers: list[str]) -> None:
    """The daily DAG's tasks: one staging task per tier, known when the DAG is parsed."""
    staged = [stage_tier.override(task_id=f"stage__{t}")(args.flow, t, args.start, args.end)
              for t in tiers]
    wire_run(args, staged)


def check_adhoc(flow: str, start: str, end: str) -> list[str]:
    """The ad-hoc form's cross-field checks, in words a person fixes; returns tiers to stage."""
    from datetime import UTC, datetime

    from kafka_recon.pipeline import load, staged_tiers

    try:
        f, window, _ = load(flow, start, end)
    except ValueError as exc:  # an unknown flow, an end not after the start
        raise ValueError(f"trigger form: {exc}") from None
    if window.start > datetime.now(UTC):
        raise ValueError(f"trigger form: the window start {start} is in the future")
    return staged_tiers(f)
