"""kafka-recon's Airflow DAGs, built for the flows of the flow config: what a DAG file imports.

A team's DAG folder needs one file (Airflow reads only files that mention both "airflow" and
"dag", hence the comment):

    # Airflow DAGs of kafka-recon
    from kafka_recon.dags import flow_dags
    globals().update(flow_dags())

and, to see a flow whose config is wrong as an import error of its own (every other flow keeps
its DAG), a second:

    # Airflow: the flow config's errors as this DAG file's import errors
    from kafka_recon.dags import refuse_bad_flows
    refuse_bad_flows()

`flow_dags` builds, for the flows of the configured flow config (`kafka_recon.settings`):
`recon__<flow>`, one scheduled reconciliation per flow; `recon_adhoc`, any flow over any window
from the trigger form; `recon_repair`, a window's lost records re-delivered once an owner
approves; `recon_snapshots`, the Flume counters' and flight recorder's snapshots.
Building reads the flow config, a local YAML file, and imports neither pyspark, pandas nor
great_expectations; the tasks' work is wired from kafka_recon.airflow.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG, AssetAlias, Param, get_parsing_context, task
from airflow.timetables.interval import CronDataIntervalTimetable

from kafka_recon.airflow.macros import MACROS
from kafka_recon.airflow.names import flow_dag_id, replay_pool
from kafka_recon.airflow.run_args import RunArgs
from kafka_recon.airflow.tasks import (
    RECONCILED_ALIAS,
    repair_folder,
    repair_summary,
)
from kafka_recon.airflow.wiring import begin, daily_run, runs_in_flight, wire_run
from kafka_recon.config import Flow, load_flows_partial, schedule_of
from kafka_recon.errors import ConfigError
from kafka_recon.settings import config_path, existing_config, task_retries

START = datetime(2026, 1, 1, tzinfo=UTC)

SCHEDULED_DOC = """Scheduled reconciliation of one flow: `recon__<flow>`.

The data interval is the window: the run after midnight reconciles the day before it (or, with
the flow's `window: 1h`, each hour after it ends), once the window has closed (its end plus the
flow's grace and disorder margin: `begin` waits for it, deferred). An ok window updates
the flow's Asset `kafka-recon://<flow>`.
"""

ADHOC_DOC = """`recon_adhoc`: reconcile any configured flow over any window, from the trigger form.

The form's fields are DAG Params, checked when the run is triggered (a bad value is refused with
the field's description); `check` then tests what a schema cannot (end after start, a start not
in the future) before anything is read. A window that has not closed yet (its end plus the
flow's grace and disorder margin) is waited for, deferred, as the scheduled DAG waits.
"""

REPAIR_DOC = """`recon_repair`: re-deliver a window's lost records, after an owner approves.

`plan` reads every lost record of the window's result back from where it still is (Spark, into
the run folder's `repair/`); `approve` shows the plan's summary and waits for a person's answer
(the standard provider's ApprovalOperator: Airflow's Required Actions); only on approval does
`deliver` publish the plan, by its digest, to the repair topics, each record once ever. A
rejection, or no answer within the timeout, writes nothing; Airflow records who answered.
`settle` then gives the sink's consumer the flow's `repair.settle` to load the repair topic,
and `verify` reconciles the window again through `recon_adhoc`: the repair succeeds when the
window is whole, and the report mailed to the owners shows each hop before and after.
"""

SNAPSHOTS_DOC = """`recon_snapshots`: every five minutes, one snapshot of each flow's Flume
counters and of its topic's partitions and production groups (the flight recorder).

A Flume tier is counted from the growth of its counters between the snapshots that bracket a
window, and a finding's cause is read from what the recorder saw during the window: both need
snapshots taken while the window runs. One task per flow.
"""


def flow_dags(config: Path | str | None = None) -> dict[str, DAG]:
    """Every kafka-recon DAG for the valid flows of `config` (default: the configured flow
    config), by DAG id. A bad flow gets no DAG here: `refuse_bad_flows` names it.

    In a task's own process (Airflow's parsing context names the task's DAG) only that DAG is
    built: every task parses this file before it runs, and with many flows building all their
    DAGs made each task's start slower, past Airflow's import timeout on a loaded worker."""
    path = Path(config) if config is not None else config_path()
    flows = load_flows_partial(path)[0]
    running = get_parsing_context().dag_id

    def wanted(dag_id: str) -> bool:
        return running is None or running == dag_id

    dags = {flow_dag_id(f.name): scheduled_dag(f, path) for f in flows.values()
            if wanted(flow_dag_id(f.name))}
    if wanted("recon_adhoc"):
        dags["recon_adhoc"] = adhoc_dag(sorted(flows), path)
    if flows:  # a config that cannot be read is refuse_bad_flows' import error, not a DAG's
        if wanted("recon_repair"):
            dags["recon_repair"] = repair_dag(sorted(flows), path)
        if wanted("recon_snapshots"):
            dags["recon_snapshots"] = snapshots_dag(sorted(flows), path)
    return dags


def refuse_bad_flows(config: Path | str | None = None) -> None:
    """Raise one ConfigError naming every flow that has no DAG and why (or where the flow config
    was looked for, when there is none): Airflow shows it as the calling file's import error."""
    path = Path(config) if config is not None else existing_config()
    errors = load_flows_partial(path)[1]
    if errors:
        raise ConfigError(f"{len(errors)} flow(s) of the flow config have no DAG: "
                          + " | ".join(f"flow '{n}': {e}" if n != "(file)" else str(e)
                                       for n, e in sorted(errors.items())))


def _default_args(owner: str) -> dict[str, object]:
    return {
        "owner": owner,
        "retries": task_retries(),
        "retry_delay": timedelta(minutes=2),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=30),
    }


def scheduled_dag(flow: Flow, config: Path) -> DAG:
    with DAG(
        dag_id=flow_dag_id(flow.name),
        description=f"Daily reconciliation of flow {flow.name}",
        # a data-interval timetable (Airflow 3's plain "@daily" gives zero-width intervals),
        # one interval per window of the flow (1d unless it says 1h, 10m, ...)
        schedule=CronDataIntervalTimetable(str(schedule_of(flow.window)), timezone="UTC"),
        start_date=START,
        catchup=False,
        # windows are runs of their own: one that waits, fails or retries never holds back the
        # next window (the run folder's claim already keeps two runs off one window)
        max_active_runs=runs_in_flight(flow),
        default_args=_default_args(",".join(flow.owners)),
        tags=["kafka-recon", f"flow:{flow.name}", *flow.tags],
        user_defined_macros=MACROS,
        doc_md=SCHEDULED_DOC,
    ) as dag:
        daily_run(RunArgs(flow=flow.name, start="{{ data_interval_start.isoformat() }}",
                          end="{{ data_interval_end.isoformat() }}", config=str(config),
                          pool=replay_pool(flow.cluster)),
                  flow)
    return dag


def last_closed_day(now: datetime | None = None) -> tuple[str, str]:
    """Yesterday in UTC, the window a trigger form starts with: the last whole day closed."""
    today = (now or datetime.now(UTC)).replace(hour=0, minute=0, second=0, microsecond=0)
    return (f"{today - timedelta(days=1):%Y-%m-%dT%H:%M:%SZ}", f"{today:%Y-%m-%dT%H:%M:%SZ}")


def _window_params(flows: list[str]) -> dict[str, Param]:
    """The trigger form's flow and window, as the ad-hoc and repair DAGs ask for them: the
    configured flows to choose from, and the last closed day, so no field starts red (the
    Reconciliation page's buttons fill in a window's own)."""
    start, end = last_closed_day()
    return {
        "flow": Param(flows[0] if flows else "", type="string", enum=flows,
                      title="Flow", description="A flow of the flow config."),
        "start": Param(start, type="string", format="date-time", title="Window start (UTC)",
                       description="Where the window begins (inclusive)."),
        "end": Param(end, type="string", format="date-time", title="Window end (UTC)",
                     description="Where it ends (exclusive), after the start."),
    }


@task
def check(flow: str, start: str, end: str) -> list[str]:
    """What the form's schema cannot check; returns the tiers the run stages."""
    from kafka_recon.airflow.tasks import check_adhoc

    return check_adhoc(flow, start, end)


def adhoc_dag(flows: list[str], config: Path) -> DAG:
    with DAG(
        dag_id="recon_adhoc",
        # run only when triggered: nothing to gain by a paused DAG a person must find first
        is_paused_upon_creation=False,
        description="Reconcile one flow over a chosen window",
        schedule=None,
        start_date=START,
        catchup=False,
        default_args={"owner": "kafka-recon", "retries": 0},
        tags=["kafka-recon", "ad-hoc"],
        user_defined_macros=MACROS,
        params={
            **_window_params(flows),
            "replays": Param(2, type="integer", minimum=1, maximum=10, title="Replays",
                             description="Replays of the topic, each under a fresh consumer "
                                         "group (1 to 10)."),
            "email": Param(True, type="boolean", title="Email the owners",
                           description="Mail the report to the flow's owners."),
        },
        doc_md=ADHOC_DOC,
    ) as dag:
        args = RunArgs(flow="{{ params.flow }}", start="{{ params.start }}",
                       end="{{ params.end }}", config=str(config),
                       replays="{{ params.replays }}", email="{{ params.email }}")
        checked = check(args.flow, args.start, args.end)
        begun = begin(args)
        checked >> begun
        wire_run(args, begun, AssetAlias(RECONCILED_ALIAS))
    return dag


def repair_dag(flows: list[str], config: Path) -> DAG:
    from airflow.providers.standard.operators.hitl import ApprovalOperator
    from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator

    from kafka_recon.airflow.operators.spark_submit import spark_job
    from kafka_recon.airflow.sensors.wait_until import WaitUntilSensor
    from kafka_recon.settings import repair_wait

    with DAG(
        dag_id="recon_repair",
        # run only when triggered: nothing to gain by a paused DAG a person must find first
        is_paused_upon_creation=False,
        description="Re-deliver a window's lost records, after an owner approves",
        schedule=None,
        start_date=START,
        catchup=False,
        default_args={"owner": "kafka-recon", "retries": 0},
        tags=["kafka-recon", "repair"],
        user_defined_macros=MACROS,
        params=_window_params(flows),
        doc_md=REPAIR_DOC,
    ) as dag:
        args = RunArgs(flow="{{ params.flow }}", start="{{ params.start }}",
                       end="{{ params.end }}", config=str(config))
        w = {"flow": args.flow, "start": args.start, "end": args.end}
        folder = repair_folder(**w)
        plan = spark_job("repair_plan", args, out_task="repair_folder")
        summary = repair_summary(**w)
        approve = ApprovalOperator(
            task_id="approve",
            subject="Re-deliver the lost records of {{ params.flow }}, {{ params.start }} to "
                    "{{ params.end }}?",
            body="{{ ti.xcom_pull(task_ids='repair_summary')['body'] }}",
            response_timeout=repair_wait())
        deliver = spark_job("repair_deliver", args, out_task="repair_folder", more=[
            "--plan", "{{ ti.xcom_pull(task_ids='repair_summary')['digest'] }}"])
        # the sink's consumer loads the repair topic meanwhile; no worker slot is held
        settle = WaitUntilSensor(
            task_id="settle",
            target_time="{{ kafka_recon_settled_at(params.flow, " + json.dumps(str(config))
                        + ") }}")
        # the window reconciled again, by the ad-hoc DAG (its report, mailed to the owners,
        # shows each hop before and after): a window still missing records fails the repair
        verify = TriggerDagRunOperator(
            task_id="verify", trigger_dag_id="recon_adhoc",
            conf={**w, "replays": 2, "email": True},
            wait_for_completion=True, deferrable=True, poke_interval=15,
            fail_when_dag_is_paused=True)
        folder >> plan >> summary >> approve >> deliver >> settle >> verify
    return dag


@task
def snapshot(flow: str, config: str) -> list[dict[str, object]]:
    from kafka_recon.cluster.snapshots import take_snapshots
    from kafka_recon.config import load_flow
    from kafka_recon.errors import SourceUnreadable

    taken, errors = take_snapshots({flow: load_flow(config, flow)})
    if errors:  # what could be taken is kept; the task still goes red
        raise SourceUnreadable("; ".join(errors))
    return taken


def snapshots_dag(flows: list[str], config: Path) -> DAG:
    with DAG(
        dag_id="recon_snapshots",
        description="Snapshot each flow's Flume counters and its topic's leaders, ISR, offsets "
                    "and groups",
        schedule="*/5 * * * *",
        start_date=START,
        catchup=False,
        max_active_runs=1,
        # a missed snapshot only widens the bracket; a late retry is worse than the next run
        default_args={"owner": "kafka-recon", "retries": 1,
                      "retry_delay": timedelta(seconds=30),
                      "execution_timeout": timedelta(minutes=2)},
        tags=["kafka-recon", "snapshots"],
        doc_md=SNAPSHOTS_DOC,
    ) as dag:
        for name in flows:
            snapshot.override(task_id=f"snapshot__{name}")(name, str(config))
    return dag
