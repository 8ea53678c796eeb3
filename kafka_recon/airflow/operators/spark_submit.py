"""The Spark step of a run: spark-submit of `kafka_recon/jobs/<step>.py`, or the step in the
task's own process against a Spark Connect server; the flow's connections resolved in the task
and handed to the job; the run's lineage (OpenLineage) from the flow's tiers."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from kafka_recon.airflow.links import WindowPageLink
from kafka_recon.airflow.ownership import hold, run_owner
from kafka_recon.airflow.run_args import RunArgs
from kafka_recon.settings import spark_jobs_dir
from kafka_recon.spark.conf import spark_conf

if TYPE_CHECKING:
    from kafka_recon.config import Flow
    from kafka_recon.orchestrate import Run


class ReconSparkSubmitOperator(SparkSubmitOperator):
    """spark-submit of a kafka-recon step, with the flow's connections resolved here.

    The connections are resolved through Airflow when the task runs (metadata database,
    environment, secrets backend) and handed to the Spark job in its environment: never on the
    command line, never in a rendered template field, and every secret is masked in the logs.
    """

    def __init__(self, *, step: str, flow: str, config: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.step, self.flow, self.config = step, flow, config

    template_fields = (*SparkSubmitOperator.template_fields, "flow")
    operator_extra_links = (WindowPageLink(),)

    def execute(self, context: Any) -> None:
        from airflow.providers.openlineage.conf import is_disabled
        from airflow.sdk.log import mask_secret

        from kafka_recon.config import KafkaTier, SqlTier, load_flow
        from kafka_recon.settings import (
            RUN_OWNER_VAR,
            conn_env_var,
            resolved_paths,
            spark_remote,
            store_conn,
        )
        from kafka_recon.sources.connections import resolved_for_spark, secrets_of
        from kafka_recon.sources.kafka_client import endpoint
        from kafka_recon.stores.objects import for_spark as runs_root_for_spark

        flow = load_flow(self.config, self.flow)
        kafka = [t for t in flow.tiers if isinstance(t, KafkaTier) and t.conn]
        # the store's connection too: the job renews the window's lease in it
        stores = [c for c in (store_conn(),) if c]
        # Spark reads an SQL tier's ids over JDBC; a counts tier was staged by this task's
        # hook and is not handed (its database may have no JDBC row)
        handed = resolved_for_spark([t.conn for t in flow.tiers
                                     if isinstance(t, SqlTier) and t.ids is not None]
                                    + stores, [t.conn for t in kafka if t.conn])
        for tier in kafka:
            endpoint(tier)  # masks the tier's secrets in every spelling (JAAS, keys, ...)
        kafka_vars = {conn_env_var(t.conn) for t in kafka if t.conn}
        for var, value in handed.items():
            mask_secret(value)  # a kafka connection's settings, handed as one JSON text
            if var not in kafka_vars:
                for secret in secrets_of(value):
                    mask_secret(secret)
        # the runs root's object store connection: the job's driver and executors write there
        objects = runs_root_for_spark()
        for value in objects.values():
            fields = json.loads(value)
            for secret in (value, fields["password"], fields["extra"].get("aws_secret_access_key"),
                           fields["extra"].get("aws_session_token")):
                if secret:
                    mask_secret(secret)
        handed.update(objects)
        # the paths as this task resolved them (Airflow's [kafka_recon] section included): the
        # job writes where the task reads, and never imports Airflow's configuration itself
        self.env_vars = {**(self.env_vars or {}), **resolved_paths(), **handed,
                         RUN_OWNER_VAR: run_owner(context),
                         "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        self.application = self.job_file()
        self.conf = self.submit_conf(flow)
        self.jars = self.submit_jars(flow)
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
        self._hold_window(context)
        self._class_archive()
        super().execute(context)

    def _hold_window(self, context: Any) -> None:
        """Go on only while this DAG run holds its window, and renew its lease from this task's
        start: the job renews it too, but only once spark-submit has started its driver, which
        on a loaded worker took longer than a short lease (another run then took the window).
        A repair step's run holds no window: its job holds it for itself, as a command line
        run does."""
        from kafka_recon.orchestrate import REPAIR_STEPS

        if self.step not in REPAIR_STEPS and (run := self._window_run()) is not None:
            hold(run, run_owner(context))

    def submit_conf(self, flow: Flow | None = None) -> dict[str, str]:
        """spark-submit's settings (`kafka_recon.spark.conf.spark_conf`): the flow's `spark:`
        block over the Spark connection's extra `conf`, over this worker's spark-defaults.conf;
        kafka-recon's own defaults are set inside the job, where nobody set them. The driver's
        heap is chosen by the window's size, as staging counted it (`conf.driver_heap`)."""
        from kafka_recon.config import load_flow

        flow = flow or load_flow(self.config, self.flow)
        return spark_conf({**self._connection_conf(), **flow.spark_settings,
                           **(self.conf or {})}, records=self._staged_size())

    def _given(self) -> dict[str, str]:
        """The step's arguments, rendered: option -> value."""
        args = [str(a) for a in self.application_args or []]
        return dict(zip(args[::2], args[1::2], strict=False))

    def _run(self, given: dict[str, str]) -> Run:
        from kafka_recon import orchestrate

        return orchestrate.load(self.flow, given["--start"], given["--end"],
                                Path(given["--config"]), given["--out"])

    def _window_run(self) -> Run | None:
        """The run the step's arguments name; None when they name no run folder."""
        given = self._given()
        if not {"--start", "--end", "--config", "--out"} <= given.keys():
            return None
        return self._run(given)

    def _staged_size(self) -> int | None:
        """The window's size from the run folder's stage.json (the stage task ran before this
        one); None when the step's arguments name no run folder, or nothing was staged."""
        from kafka_recon import orchestrate

        run = self._window_run()
        return orchestrate.staged_size(run) if run is not None else None

    def submit_jars(self, flow: Flow | None = None) -> str | None:
        """The rendered jars, with Iceberg's and Delta's for a flow that reads a table."""
        from kafka_recon.config import load_flow
        from kafka_recon.settings import lake_jars

        flow = flow or load_flow(self.config, self.flow)
        if not flow.table_tiers:
            return self.jars
        return ",".join(j for j in [*(self.jars or "").split(","), *lake_jars()] if j)

    def _connection_conf(self) -> dict[str, str]:
        """The Spark connection's extra `conf`: a team's settings for every kafka-recon job on
        that cluster (a JSON object of Spark settings)."""
        import json

        from airflow.sdk import BaseHook

        from kafka_recon.errors import ConnectionUnusable

        extra = BaseHook.get_connection(self._conn_id).extra_dejson.get("conf") or {}
        if isinstance(extra, str):
            extra = json.loads(extra)
        if not isinstance(extra, dict):
            raise ConnectionUnusable(f"connection '{self._conn_id}': its extra 'conf' must be "
                                     "a JSON object of Spark settings")
        return {str(k): str(v) for k, v in extra.items()}

    def job_file(self) -> str:
        """The step's entry point where the worker running the task has the package, not where
        the DAG was parsed (another host, another virtualenv)."""
        return str(spark_jobs_dir() / f"{self.step}.py")

    def _through_server(self, context: Any, remote: str) -> None:
        """The step in this task's process, in a session of the Spark Connect server
        `KAFKA_RECON_SPARK_REMOTE` names (kafka_recon.spark.server): no spark-submit, no
        Spark of the task's own to start and warm up. Connections resolve through Airflow."""

        from kafka_recon import orchestrate
        from kafka_recon.settings import shown_remote

        given = self._given()
        run = self._run(given)
        replays = int(given["--replays"]) if "--replays" in given else None
        step = Path(str(self.application)).stem
        self.log.info("kafka-recon %s through the Spark Connect server %s", step,
                      shown_remote(remote))
        summary = orchestrate.spark_step(step, run, replays, run_owner(context), remote=remote,
                                         plan=given.get("--plan"))
        self.log.info("kafka-recon %s: %s", step, summary)

    _lineage_of_run: Any = None

    def _class_archive(self) -> None:
        """This worker's class archive, when made, for the driver spark-submit starts here
        (kafka_recon.spark.classes); a driver started elsewhere finds none and goes without."""
        from kafka_recon.settings import class_archive_path
        from kafka_recon.spark.conf import archive_options, driver_conf

        self.conf = driver_conf(dict(self.conf or {}), archive_options(class_archive_path()))

    def _spark_lineage(self) -> None:
        """The Spark jobs' own lineage: the OpenLineage listener on, its events sent where
        Airflow's go, as children of this task's run (the Spark provider injects the parent
        job, and an http transport with its credentials)."""
        from airflow.providers.openlineage.conf import namespace, transport

        from kafka_recon.errors import MissingJarsError
        from kafka_recon.outputs.lineage import listener_conf, transport_secrets
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
        added, note = listener_conf(sends, namespace(),
                                    conf.get("spark.driver.extraJavaOptions", ""))
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
        from kafka_recon.runfolder import FILES

        args = [str(a) for a in self.application_args or []]
        out = args[args.index("--out") + 1] if "--out" in args[:-1] else ""
        # the run folder as text: an object store's is named without reaching it (or its
        # connection) from the lineage hook
        lineage = of_run(load_flow(self.config, self.flow),
                         f"{out.rstrip('/')}/{FILES['result']}" if out.startswith(("/", "s3://"))
                         else None)
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


# the steps that replay a window's topic: they take --replays, wait in the cluster's pool, and
# their task gathers the staging first
REPLAY_STEPS = ("replay", "replay_reconcile")


def spark_job(step: str, args: RunArgs, out_task: str = "begin",
              more: list[str] | None = None,
              trigger_rule: str = "all_success") -> SparkSubmitOperator:
    """The step's spark-submit; `out_task` is the task whose XCom is the run folder, `more`
    the step's own arguments (templates)."""
    app_args = ["--config", args.config, "--flow", args.flow, "--start", args.start,
                "--end", args.end, "--out", f"{{{{ ti.xcom_pull(task_ids='{out_task}') }}}}",
                *(more or [])]
    if args.replays is not None and step in REPLAY_STEPS:
        app_args += ["--replays", args.replays]
    return ReconSparkSubmitOperator(
        task_id=step,
        step=step,
        flow=args.flow,
        config=args.config,
        conn_id="spark_default",
        # replays of one cluster wait for a slot of its pool (made on first use, pools.py)
        pool=args.pool if step in REPLAY_STEPS else None,
        trigger_rule=trigger_rule,
        name=f"kafka-recon-{step}-{args.flow}",
        jars="{{ kafka_recon_spark_jars() }}",
        application_args=app_args,
    )
