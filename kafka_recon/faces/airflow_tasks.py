"""The tasks of one reconciliation run, wired inside the DAG being defined.

The daily DAG (one per flow, window = data interval) and the ad-hoc DAG (flow and window from the
trigger form) run the same steps (`kafka_recon.orchestrate`); they differ only in where flow,
window and options come from, which are Jinja templates rendered when each task runs. Task
bodies import the orchestration lazily: parsing a DAG file stays free of I/O and of pyspark,
pandas and great_expectations.

    wait_for_closing >> begin >> stage__<tier> (one per SQL/Flume tier) >> stage_topic
      >> replay_reconcile >> validate >> report (all done) >> [history, notify, alert] (all done)
      >> verdict (all done)

`wait_for_closing` defers (no worker slot is held) until the window's closing time: its end
plus the flow's longest grace and disorder margin (`Flow.closing`). A window reconciled before
then is rightly inconclusive: records may still arrive.

What fails and what retries: a window with findings, or an inconclusive one, fails its run at
once (`validate`, `verdict`: AirflowFailException, never retried: a retry would read the same
answer); an error that may pass on a retry (a broker, database or SMTP server that cannot be
reached, Spark failing to start) is retried with backoff. Windows are runs of their own, never
queued behind each other, so a mail that fails never holds back the next window's verdict.

`begin` holds the window's run folder for this DAG run (a second run of the same window, daily
or ad-hoc, is refused naming the first) and clears its previous outputs, so a run that fails
half-way is reported as the inconclusive run it is (naming the step), never as the previous
run's answer. Every later task checks that its run still holds the folder; `verdict` lets go.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import TriggerRule, task

from kafka_recon.config import Flow
from kafka_recon.settings import spark_jobs_dir
from kafka_recon.spark.session import spark_conf


@dataclass(frozen=True)
class RunArgs:
    """Templates (or literals) for what one run reconciles."""
    flow: str
    start: str
    end: str
    config: str
    replays: str | None = None  # None: the flow's own replay count
    email: str = "True"

    @property
    def flow_expr(self) -> str:
        """The flow as a Jinja expression (inside another template's braces)."""
        return _expr(self.flow)

    @property
    def end_expr(self) -> str:
        return _expr(self.end)


def _expr(template: str) -> str:
    """`{{ x }}` as the expression x; a literal as a quoted string."""
    import json

    inner = template.strip()
    if inner.startswith("{{") and inner.endswith("}}"):
        return "(" + inner[2:-2].strip() + ")"
    return json.dumps(template)


def spark_jars() -> str:
    """A user macro: listing .jars is I/O, so it happens when a task renders, not at parse."""
    from kafka_recon.settings import spark_jars as jars

    return ",".join(jars())


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes")


class ReconSparkSubmitOperator(SparkSubmitOperator):
    """spark-submit of a kafka-recon step, with the flow's connections resolved here.

    The connections are resolved through Airflow when the task runs (metadata database,
    environment, secrets backend) and handed to the Spark job in its environment: never on the
    command line, never in a rendered template field, and every secret is masked in the logs.
    """

    def __init__(self, *, flow: str, config: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.flow, self.config = flow, config

    template_fields = (*SparkSubmitOperator.template_fields, "flow")

    def execute(self, context: Any) -> None:
        from airflow.providers.openlineage.conf import is_disabled
        from airflow.sdk.log import mask_secret

        from kafka_recon.config import KafkaTier, SqlTier, load_flow
        from kafka_recon.settings import RUN_OWNER_VAR, conn_env_var, spark_remote
        from kafka_recon.sources.connections import resolved_for_spark, secrets_of
        from kafka_recon.sources.kafka_client import endpoint

        flow = load_flow(self.config, self.flow)
        kafka = [t for t in flow.tiers if isinstance(t, KafkaTier) and t.conn]
        handed = resolved_for_spark([t.conn for t in flow.tiers if isinstance(t, SqlTier)],
                                    [t.conn for t in kafka if t.conn])
        for tier in kafka:
            endpoint(tier)  # masks the tier's secrets in every spelling (JAAS, keys, ...)
        kafka_vars = {conn_env_var(t.conn) for t in kafka if t.conn}
        for var, value in handed.items():
            mask_secret(value)  # a kafka connection's settings, handed as one JSON text
            if var not in kafka_vars:
                for secret in secrets_of(value):
                    mask_secret(secret)
        self.env_vars = {**(self.env_vars or {}), **handed, RUN_OWNER_VAR: _owner(context)}
        remote = spark_remote()
        if not is_disabled():  # OpenLineage is off unless a transport is configured
            self._lineage_of_run = self._lineage()
            if remote:
                self.log.warning("lineage: the Spark jobs' own lineage is not sent: they run "
                                 "in a Spark Connect server, whose listeners are its own")
            else:
                self._spark_lineage()
        if remote:
            self._through_server(context, remote)
            return
        self._class_archive()
        super().execute(context)

    def _through_server(self, context: Any, remote: str) -> None:
        """The step in this task's process, in a session of the Spark Connect server
        `KAFKA_RECON_SPARK_REMOTE` names (kafka_recon.spark.server): no spark-submit, no
        Spark of the task's own to start and warm up. Connections resolve through Airflow."""
        import json

        from kafka_recon import orchestrate
        from kafka_recon.settings import shown_remote

        args = [str(a) for a in self.application_args or []]
        given = dict(zip(args[::2], args[1::2], strict=False))
        run = orchestrate.load(self.flow, given["--start"], given["--end"],
                               Path(given["--config"]), Path(given["--out"]))
        replays = int(given["--replays"]) if "--replays" in given else None
        step = Path(str(self.application)).stem
        self.log.info("kafka-recon %s through the Spark Connect server %s", step,
                      shown_remote(remote))
        summary = orchestrate.spark_step(step, run, replays, _owner(context), remote=remote)
        self.log.info("kafka-recon %s: %s", step, json.dumps(summary))

    _lineage_of_run: Any = None

    def _class_archive(self) -> None:
        """This worker's class archive, when made, for the driver spark-submit starts here
        (kafka_recon.spark.classes); a driver started elsewhere finds none and goes without."""
        from kafka_recon.settings import class_archive_path
        from kafka_recon.spark.session import archive_options, driver_conf

        self.conf = driver_conf(dict(self.conf or {}), archive_options(class_archive_path()))

    def _spark_lineage(self) -> None:
        """The Spark jobs' own lineage: the OpenLineage listener on, its events sent where
        Airflow's go, as children of this task's run (the Spark provider injects the parent
        job, and an http transport with its credentials)."""
        from airflow.providers.openlineage.conf import namespace, transport

        from kafka_recon.errors import MissingJarsError
        from kafka_recon.outputs.lineage import spark_conf, transport_secrets
        from kafka_recon.settings import lineage_jars

        try:
            jars = lineage_jars()
        except MissingJarsError as e:
            self.log.warning("lineage: the Spark jobs' lineage is not sent: %s", e)
            return
        from airflow.sdk.log import mask_secret

        sends = transport()
        for secret in transport_secrets(sends):  # handed to Spark on its command line
            mask_secret(secret)
        conf = dict(self.conf or {})
        added, note = spark_conf(sends, namespace(), conf.get("spark.driver.extraJavaOptions", ""))
        if note:
            self.log.warning("lineage: %s", note)
        self.conf = {**conf, **added}
        self.jars = ",".join([j for j in (self.jars or "").split(",") if j] + jars)
        self._openlineage_inject_parent_job_info = True
        self._openlineage_inject_transport_info = sends.get("type") in ("http", "composite")

    def _lineage(self) -> Any:
        """The flow's tiers as this job's inputs, its result as the output (see
        kafka_recon.outputs.lineage for the names).

        Made here, in the task's own process: OpenLineage's provider calls the methods below in
        a forked child, where reaching Airflow's connections would hang until its timeout. So
        the start event names no dataset (connections are not resolved yet); the complete and
        failure events name them all. Lineage never fails the task."""
        try:
            return self._made_lineage()
        except Exception as e:  # noqa: BLE001 (a lineage error is logged, never raised)
            self.log.warning("lineage: not made: %s", str(e).splitlines()[0] if str(e) else e)
            return None

    def _made_lineage(self) -> Any:
        from airflow.providers.common.compat.openlineage.facet import (
            Dataset,
            DocumentationDatasetFacet,
        )
        from airflow.providers.openlineage.extractors import OperatorLineage

        from kafka_recon.config import load_flow
        from kafka_recon.outputs.lineage import LineageDataset, of_run

        args = [str(a) for a in self.application_args or []]
        out = args[args.index("--out") + 1] if "--out" in args[:-1] else ""
        lineage = of_run(load_flow(self.config, self.flow),
                         Path(out) / "result.json" if out.startswith("/") else None)
        for line in lineage.skipped:
            self.log.warning("lineage: %s", line)

        def dataset(d: LineageDataset) -> Any:
            what = (f"the result of kafka-recon flow '{self.flow}'" if d.tier == "result"
                    else f"tier '{d.tier}' of kafka-recon flow '{self.flow}'")
            return Dataset(namespace=d.namespace, name=d.name,
                           facets={"documentation": DocumentationDatasetFacet(description=what)})

        return OperatorLineage(inputs=[dataset(d) for d in lineage.inputs],
                               outputs=[dataset(d) for d in lineage.outputs])

    def get_openlineage_facets_on_start(self) -> Any:
        from airflow.providers.openlineage.extractors import OperatorLineage

        return OperatorLineage()

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        return self._lineage_of_run

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        return self._lineage_of_run


def spark_job(step: str, args: RunArgs) -> SparkSubmitOperator:
    app_args = ["--config", args.config, "--flow", args.flow, "--start", args.start,
                "--end", args.end, "--out", "{{ ti.xcom_pull(task_ids='stage_topic') }}"]
    if args.replays is not None and step in ("replay", "replay_reconcile"):
        app_args += ["--replays", args.replays]
    return ReconSparkSubmitOperator(
        task_id=step,
        flow=args.flow,
        config=args.config,
        conn_id="spark_default",
        application=str(spark_jobs_dir() / f"{step}.py"),
        name=f"kafka-recon-{step}-{args.flow}",
        jars="{{ kafka_recon_spark_jars() }}",
        conf=spark_conf(),
        env_vars={"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable},
        application_args=app_args,
    )


def _owner(context: Any = None) -> str:
    """This DAG run, as the run folder's owner: `<dag_id>/<run_id>`."""
    if context is None:
        from airflow.sdk import get_current_context

        context = get_current_context()
    return f"{context['dag'].dag_id}/{context['run_id']}"


def _held(flow: str, start: str, end: str) -> Any:
    """The run, once this DAG run is known to hold its folder."""
    from kafka_recon import orchestrate

    run = orchestrate.load(flow, start, end)
    orchestrate.check_owner(run, _owner())
    return run


def closing_time(flow: str, end: str, config: str) -> str:
    """A user macro: the closing time of the window ending at `end` (ISO 8601), read from the
    flow config when the wait renders, so the wait follows the config the run will use."""
    from kafka_recon.config import load_flow
    from kafka_recon.window import iso_z, parse_instant

    return iso_z(parse_instant(end, "window end") + load_flow(config, flow).closing)


def runs_in_flight(flow: Flow) -> int:
    """How many of a flow's windows may be running at once: every window still waiting for its
    closing time, a few counting, and never fewer than Airflow's default of 16."""
    return max(16, int(flow.closing / flow.window) + 4)


# the macros a reconciliation DAG's templates call
MACROS = {"kafka_recon_spark_jars": spark_jars, "kafka_recon_closing_time": closing_time}


def wait_for_closing(args: RunArgs) -> Any:
    """Waits for the window's closing time in the triggerer: no worker slot is held meanwhile;
    a window closed long ago passes at once."""
    import json

    from airflow.providers.standard.sensors.date_time import DateTimeSensorAsync

    return DateTimeSensorAsync(
        task_id="wait_for_closing",
        target_time=("{{ kafka_recon_closing_time(" + args.flow_expr + ", " + args.end_expr
                     + ", " + json.dumps(args.config) + ") }}"))


@task
def begin(flow: str, start: str, end: str) -> str:
    """Hold the window's folder for this run and clear its previous outputs."""
    from kafka_recon import orchestrate

    run = orchestrate.load(flow, start, end)
    orchestrate.begin(run, _owner())
    return str(run.out)


@task
def stage_tier(flow: str, tier: str, start: str, end: str) -> str:
    from kafka_recon import orchestrate

    orchestrate.stage_tier(_held(flow, start, end), tier)
    return tier


@task(trigger_rule=TriggerRule.NONE_FAILED)
def stage_topic(flow: str, start: str, end: str) -> str:
    from kafka_recon import orchestrate

    run = _held(flow, start, end)
    orchestrate.stage_topic(run)
    return str(run.out)


@task
def validate(flow: str, start: str, end: str) -> bool:
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_recon import orchestrate

    summary = orchestrate.validate(_held(flow, start, end))
    if not summary["success"]:
        failed = {k: v["failed"] for k, v in summary["suites"].items() if v["failed"]}
        # the window's answer: a retry would validate the same counts
        raise AirflowFailException(f"Great Expectations validation failed: {failed}")
    return True


@task(trigger_rule=TriggerRule.ALL_DONE)
def report(flow: str, start: str, end: str) -> dict[str, str]:
    """The report of what the run concluded: a step that failed makes it inconclusive."""
    from kafka_recon import orchestrate

    return orchestrate.report(_held(flow, start, end))


@task(trigger_rule=TriggerRule.ALL_DONE)
def history(flow: str, start: str, end: str) -> dict[str, int]:
    from kafka_recon import orchestrate

    return orchestrate.record_history(_held(flow, start, end))


@task(trigger_rule=TriggerRule.ALL_DONE)
def notify(flow: str, start: str, end: str, email: str) -> str:
    from airflow.exceptions import AirflowSkipException

    from kafka_recon import orchestrate

    if not _truthy(email):
        raise AirflowSkipException("email was turned off for this run")
    return orchestrate.notify(_held(flow, start, end))


@task(trigger_rule=TriggerRule.ALL_DONE)
def alert(flow: str, start: str, end: str) -> list[dict[str, Any]]:
    """The flow's Slack and PagerDuty alerts: every one tried; the task fails after them when
    one could not be sent (the mail and the verdict are tasks of their own)."""
    from airflow.exceptions import AirflowSkipException

    from kafka_recon import orchestrate

    run = _held(flow, start, end)
    if not run.flow.alerts:
        raise AirflowSkipException(f"flow '{flow}' has no alerts")
    sent = orchestrate.alert(run)
    failed = [f"{a['type']} ({a['conn']}): {a['error']}" for a in sent if a.get("error")]
    if failed:
        raise RuntimeError(f"{len(failed)} alert(s) not sent: {'; '.join(failed)}")
    return sent


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

    run = _held(flow, start, end)
    orchestrate.finish(run, _owner())  # the run's last task: the folder is free again
    result = orchestrate.conclude(run)
    line = result.verdict()
    if result.status != "ok":
        # the window's answer, not an error a retry may clear (the reasons of an
        # inconclusive run are in this line)
        raise AirflowFailException(line)
    context = get_current_context()
    extra: dict[str, Any] = {"flow": flow, "window_start": result.window.start,
                             "window_end": result.window.end}
    for outlet in context["task"].outlets:
        if isinstance(outlet, AssetAlias):
            context["outlet_events"][outlet].add(reconciled(flow), extra=extra)
        elif isinstance(outlet, Asset):
            context["outlet_events"][outlet].extra = extra
    return line


def wire_run(args: RunArgs, staged: Any, reconciles: Any) -> None:
    """Everything after staging; `staged` is the task(s) that staged the upstream tiers;
    `reconciles`, the Asset (or alias) an ok window updates."""
    w = {"flow": args.flow, "start": args.start, "end": args.end}
    topic = stage_topic(**w)
    # steps 2 and 3 in one Spark application: the replay's records stay in memory for the
    # reconcile (two spark-submits would pay a second Spark start and a Parquet round trip)
    compared = spark_job("replay_reconcile", args)
    reported = report(**w)
    recorded = history(**w)
    notified = notify(**w, email=args.email)
    alerted = alert(**w)
    staged >> topic >> compared >> validate(**w) >> reported
    reported >> [recorded, notified, alerted] >> verdict.override(outlets=[reconciles])(**w)


def daily_run(args: RunArgs, tiers: list[str]) -> None:
    """The daily DAG's tasks: one staging task per tier, known when the DAG is parsed."""
    begun = begin(args.flow, args.start, args.end)
    wait_for_closing(args) >> begun
    staged = [stage_tier.override(task_id=f"stage__{t}")(args.flow, t, args.start, args.end)
              for t in tiers]
    if staged:
        begun >> staged
    wire_run(args, staged or begun, reconciled(args.flow))


def check_adhoc(flow: str, start: str, end: str) -> list[str]:
    """The ad-hoc form's cross-field checks, in words a person fixes. Returns the tiers to
    stage; the run begins once its window has closed."""
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
