"""One reconciliation run's tasks, wired inside the DAG being defined.

The daily DAG (one per flow, window = data interval) and the ad-hoc DAG (flow and window from the
trigger form) run the same steps (`kafka_recon.orchestrate`); they differ only in where flow,
window and options come from, which are Jinja templates rendered when each task runs.

    begin >> stage >> replay_reconcile >> report (all done)
      >> [notify, alert (a daily DAG's only when its flow has alerts)] (all done)
      >> verdict (all done)

`begin` first waits for the window's closing time, deferred (no worker slot is held): its end
plus the flow's longest grace and disorder margin (`Flow.closing`). A window reconciled before
then is rightly inconclusive: records may still arrive. Windows are runs of their own, never
queued behind each other, so a mail that fails never holds back the next window's verdict.

Then `begin` holds the window's run folder for this DAG run (a second run of the same window,
daily or ad-hoc, is refused naming the first) and clears its previous outputs, so a run that
fails half-way is reported as the inconclusive run it is (naming the step), never as the
previous run's answer. Every later task checks that its run still holds the folder; `verdict`
lets go.

Few task starts: each costs a window a wait for a worker slot and a Python start (seconds of a
core on a loaded host), and a five-minute flow pays them every five minutes. `stage` stages
every tier and checks the topic side by side in threads of one task (it was a task per tier);
`report` validates the counts (Great Expectations), writes the report and records the history
(it was three tasks); a flow without alerts has no `alert` task. A window's run is 7 task
starts (6 without alerts), 6 in a row; a flow of two SQL tiers had 11, 7 in a row
(docs/performance.md, "A window's tasks").
"""

from __future__ import annotations

import json
from typing import Any

from kafka_recon.airflow.links import WindowPageLink
from kafka_recon.airflow.operators.spark_submit import spark_job
from kafka_recon.airflow.run_args import RunArgs
from kafka_recon.airflow.tasks import (
    alert,
    notify,
    reconciled,
    report,
    stage,
    verdict,
)
from kafka_recon.config import Flow


def runs_in_flight(flow: Flow) -> int:
    """How many of a flow's windows may be running at once: every window still waiting for its
    closing time, a few counting, and never fewer than Airflow's default of 16."""
    return max(16, int(flow.closing / flow.window) + 4)


def begin(args: RunArgs) -> Any:
    """The run's `begin`: waits in the triggerer for the window's closing time (a window
    already closed passes at once), then holds the window."""
    from kafka_recon.airflow.operators.begin import BeginOperator

    return BeginOperator(
        task_id="begin", flow=args.flow, start=args.start, end=args.end,
        target_time=("{{ kafka_recon_closing_time(" + args.flow_expr + ", " + args.end_expr
                     + ", " + json.dumps(args.config) + ") }}"))


def wire_run(args: RunArgs, begun: Any, reconciles: Any, alerts: bool = True) -> None:
    """Everything after `begun`; `reconciles`, the Asset (or alias) an ok window updates;
    `alerts`: whether the run has an `alert` task (a daily DAG's flow without alerts has none:
    a task that would only skip still costs a task start every window)."""
    w = {"flow": args.flow, "start": args.start, "end": args.end}
    staged = stage(**w)
    # steps 2 and 3 in one Spark application: the replay's records stay in memory for the
    # reconcile (two spark-submits would pay a second Spark start and a Parquet round trip)
    compared = spark_job("replay_reconcile", args)
    reported = report(**w)
    notified = notify(**w, email=args.email)
    begun >> staged >> compared >> reported
    concluded = verdict.override(outlets=[reconciles])(**w)
    # the red task of a red run links the window's page, as the Spark step does
    concluded.operator.operator_extra_links = (WindowPageLink(),)  # type: ignore[attr-defined]
    told = [notified, alert(**w)] if alerts else [notified]
    reported >> told >> concluded


def daily_run(args: RunArgs, flow: Flow) -> None:
    """The daily DAG's tasks; its flow is known when the DAG is parsed (an `alert` task only
    for a flow with alerts)."""
    wire_run(args, begin(args), reconciled(args.flow), alerts=bool(flow.alerts))
