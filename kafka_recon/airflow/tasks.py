"""The bodies of a run's tasks (TaskFlow), each one call into `kafka_recon.orchestrate`. They
import the orchestration lazily: parsing a DAG file stays free of I/O and of pyspark, pandas and
great_expectations.

What fails and what retries: a window with findings, or an inconclusive one, fails its run at
once (`report`, whose validation fails, and `verdict`: AirflowFailException, never retried: a
retry would read the same answer); an error that may pass on a retry (a broker, database or
SMTP server that cannot be reached, a transaction still open on the window's partitions) is
retried with backoff; a topic that does not exist is not.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import TriggerRule, task

from kafka_recon.airflow.ownership import held_run, run_owner

log = logging.getLogger(__name__)


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes")


@task
def stage(flow: str, start: str, end: str) -> str:
    """Step 1 in one task: every SQL and Flume tier and the topic staged side by side, each in
    a thread, then stage.json. One task, not one per tier: a task start cost a window seconds
    of a worker's CPU whatever the tier held (docs/performance.md, "A window's tasks"); the
    journal still says which tier failed. A topic that does not exist fails it at once: a
    configuration fact (a rename, a typo), which a retry would only find again."""
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_recon import orchestrate
    from kafka_recon.errors import one_line
    from kafka_recon.sources.topic import TopicMissing

    run = held_run(flow, start, end)
    try:
        orchestrate.stage(run, side_by_side=True)
    except TopicMissing as exc:
        raise AirflowFailException(one_line(exc)) from None
    return str(run.out)


@task(trigger_rule=TriggerRule.ALL_DONE)
def report(flow: str, start: str, end: str) -> dict[str, str]:
    """Steps 4 to 6 in one task: the Great Expectations suites (when the Spark step gave an
    answer), the report of whatever the run concluded, and the run's rows in the history. One
    task, not three: each task start cost a window seconds of a worker and of the scheduler
    (docs/performance.md, "A window's tasks"). Validation that fails, or that could not run,
    fails the task after the report and the history are written; a failure to validate is
    retried, a validation that found the counts wrong is the window's answer and is not."""
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_recon import orchestrate

    run = held_run(flow, start, end)
    summary, broken = None, None
    if orchestrate.answered(run):
        try:
            summary = orchestrate.validate(run)
        except Exception as exc:  # the report and the history still get written
            broken = exc
    paths = orchestrate.report(run)
    orchestrate.record_history(run)
    if broken is not None:
        raise broken
    if summary is not None and not summary.success:
        failed = "; ".join(f"{k}: {f.said}" for k, v in summary.suites.items()
                           for f in v.failed)
        # the window's answer: a retry would validate the same counts
        raise AirflowFailException(f"Great Expectations validation failed: {failed}")
    return paths


@task(trigger_rule=TriggerRule.ALL_DONE)
def notify(flow: str, start: str, end: str, email: str) -> str:
    from airflow.exceptions import AirflowSkipException

    from kafka_recon import orchestrate

    if not _truthy(email):
        raise AirflowSkipException("email was turned off for this run")
    return orchestrate.notify(held_run(flow, start, end))


@task(trigger_rule=TriggerRule.ALL_DONE)
def alert(flow: str, start: str, end: str) -> list[dict[str, Any]]:
    """The flow's Slack and PagerDuty alerts: every one tried; the task fails after them when
    one could not be sent (the mail and the verdict are tasks of their own)."""
    from airflow.exceptions import AirflowSkipException

    from kafka_recon import orchestrate

    run = held_run(flow, start, end)
    if not run.flow.alerts:
        raise AirflowSkipException(f"flow '{flow}' has no alerts")
    sent = orchestrate.alert(run)
    if sent.failed:
        raise RuntimeError(f"{len(sent.failed)} alert(s) not sent: {'; '.join(sent.failed)}")
    return [a.as_json() for a in sent.alerts]  # the task's XCom: JSON


# the alias the ad-hoc DAG reconciles under: its flow is known only when it runs
RECONCILED_ALIAS = "kafka-recon-reconciled"


def reconciled(flow: str) -> Any:
    """The Airflow Asset a flow's window updates when it is reconciled `ok`: a downstream DAG
    scheduled on it runs once the flow's data is known whole (`schedule=[reconciled(...)]`,
    or `Asset("kafka-recon://<flow>")`)."""
    from airflow.sdk import Asset

    return Asset(f"kafka-recon://{flow}")


@task(trigger_rule=TriggerRule.ALL_DONE)
def verdict(flow: str, start: str, end: str) -> str:
    """Ends the run red when the flow is not ok, after owners have been told; an ok window
    updates the flow's Asset (`reconciled`), with the window as the event's extra."""
    from airflow.sdk import Asset, AssetAlias, get_current_context
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_recon import orchestrate
    from kafka_recon.airflow.links import window_page

    run = held_run(flow, start, end)
    orchestrate.finish(run, run_owner())  # the run's last task: the window is free again
    result = orchestrate.conclude(run)
    line = result.verdict()
    # the answer in the task's log, in words, and where the window's ids and actions are,
    # before anything Airflow adds
    log.info("verdict: %s", line)
    log.info("this window: %s", window_page(flow, start, end))
    if result.status != "ok":
        # the window's answer, not an error a retry may clear (the reasons of an
        # inconclusive run are in this line)
        raise AirflowFailException(line) from None
    context = get_current_context()
    extra: dict[str, Any] = {"flow": flow, "window_start": result.window.start,
                             "window_end": result.window.end}
    for outlet in context["task"].outlets:
        if isinstance(outlet, AssetAlias):
            context["outlet_events"][outlet].add(reconciled(flow), extra=extra)
        elif isinstance(outlet, Asset):
            context["outlet_events"][outlet].extra = extra
    return line


def check_adhoc(flow: str, start: str, end: str) -> list[str]:
    """The ad-hoc form's cross-field checks, in words a person fixes. Returns the tiers the
    run stages; the run begins once its window has closed."""
    from datetime import UTC, datetime

    from kafka_recon import orchestrate
    from kafka_recon.errors import CannotRun, UsageError

    try:
        run = orchestrate.load(flow, start, end)
    except CannotRun as exc:  # an unknown flow, an end not after the start
        raise UsageError(f"trigger form: {exc}") from None
    if run.window.start > datetime.now(UTC):
        raise UsageError(f"trigger form: the window start {start} is in the future")
    return orchestrate.staged_tiers(run.flow)


# ------------------------------------------------------------------ recon_repair
@task
def repair_folder(flow: str, start: str, end: str) -> str:
    """The run folder of the window to repair: it must hold a finished result with losses
    (the plan step says so in one line otherwise)."""
    from kafka_recon import orchestrate

    return str(orchestrate.load(flow, start, end).out)


@task
def repair_summary(flow: str, start: str, end: str) -> dict[str, str]:
    """What the approver reads: the plan's digest and, per hop, what would be sent."""
    from airflow.exceptions import AirflowFailException

    from kafka_recon import orchestrate
    from kafka_recon.runfiles.repair import RepairPlan

    run = orchestrate.load(flow, start, end)
    plan = run.folder.read_if(RepairPlan)
    if plan is None:
        raise AirflowFailException(f"{run.out}: the plan step wrote no plan")
    lines = [f"Plan `{plan.digest[:12]}` for flow **{flow}**, window {plan.window_start} to "
             f"{plan.window_end} (made {plan.made_at}).", ""]
    for h in plan.hops:
        sample = ", ".join(h.sample_ids) + (", ..." if h.records > len(h.sample_ids) else "")
        target = f"'{h.target}'" if h.target else "the owners (not published)"
        lines.append(f"- **{h.hop}** ({h.side} side): {h.records} of {h.lost} lost record(s) "
                     f"from the {h.source} '{h.from_tier}' to {target}, {h.bytes} bytes"
                     + (f"; first ids: {sample}" if sample else "")
                     + (f"; {h.uncovered} cannot be re-delivered ({h.uncovered_file})"
                        if h.uncovered else ""))
    lines += ["", "Approve to publish; reject and nothing is written."]
    return {"digest": plan.digest, "body": "\n".join(lines)}
