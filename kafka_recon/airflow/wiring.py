"""One reconciliation run's tasks, wired inside the DAG being defined.

The daily DAG (one per flow, window = data interval) and the ad-hoc DAG (flow and window from the
trigger form) run the same steps (`kafka_recon.orchestrate`); they differ only in where flow,
window and options come from, which are Jinja templates rendered when each task runs.

    begin >> [stage__<tier> (one per SQL/Flume tier), stage_topic] >> replay_reconcile
      >> report (all done) >> [notify, alert] (all done) >> verdict (all done)

`begin` first waits for the window's closing time, deferred (no worker slot is held): its end
plus the flow's longest grace and disorder margin (`Flow.closing`). A window reconciled before
then is rightly inconclusive: records may still arrive. Windows are runs of their own, never
queued behind each other, so a mail that fails never holds back the next window's verdict.

Then `begin` holds the window's run folder for this DAG run (a second run of the same window,
daily or ad-hoc, is refused naming the first) and clears its previous outputs, so a run that
fails half-way is reported as the inconclusive run it is (naming the step), never as the
previous run's answer. Every later task checks that its run still holds the folder; `verdict`
lets go.

The tiers' staging and the topic's checks run side by side, and the Spark step's task gathers
the staged tiers into stage.json before it starts Spark: every task start before the Spark
step delays every window's verdict (9 to 16 s each on a loaded scheduler), so there are two
in a row (`begin`, the staging), not four. After it, `report` validates the counts (Great
Expectations), writes the report and records the history in one task: three task starts were
three more waits for a worker and three more Python starts per window, for steps that read
the same run folder one after the other.
"""

from __future__ import annotations

import json
from typing import Any

from airflow.sdk import TriggerRule

from kafka_recon.airflow.links import WindowPageLink
from kafka_recon.airflow.operators.spark_submit import spark_job
from kafka_recon.airflow.run_args import RunArgs
from kafka_recon.airflow.tasks import (
    alert,
    notify,
    reconciled,
    report,
    stage_tier,
    stage_topic,
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


def wire_run(args: RunArgs, begun: Any, staged: Any, reconciles: Any) -> None:
    """Everything after `begun`; `staged` is the task(s) staging the upstream tiers (an empty
    list for a flow without SQL or Flume tiers); `reconciles`, the Asset (or alias) an ok
    window updates."""
    w = {"flow": args.flow, "start": args.start, "end": args.end}
    topic = stage_topic(**w)
    # steps 2 and 3 in one Spark application: the replay's records stay in memory for the
    # reconcile (two spark-submits would pay a second Spark start and a Parquet round trip).
    # None failed rather than all succeeded: the ad-hoc DAG's staging is mapped, and is
    # skipped for a flow with no tier to stage
    compared = spark_job("replay_reconcile", args, trigger_rule=TriggerRule.NONE_FAILED)
    reported = report(**w)
    notified = notify(**w, email=args.email)
    alerted = alert(**w)
    begun >> topic >> compared
    if staged:
        begun >> staged
        staged >> compared
    compared >> reported
    concluded = verdict.override(outlets=[reconciles])(**w)
    # the red task of a red run links the window's page, as the Spark step does
    concluded.operator.operator_extra_links = (WindowPageLink(),)  # type: ignore[attr-defined]
    reported >> [notified, alerted] >> concluded


def daily_run(args: RunArgs, tiers: list[str]) -> None:
    """The daily DAG's tasks: one staging task per tier, known when the DAG is parsed."""
    staged = [stage_tier.override(task_id=f"stage__{t}")(args.flow, t, args.start, args.end)
              for t in tiers]
    wire_run(args, begin(args), staged, reconciled(args.flow))
