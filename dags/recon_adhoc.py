"""`recon_adhoc`: reconcile any configured flow over any window, from the Airflow UI's trigger form.

The form's fields are DAG Params, checked when the run is triggered (a bad value is refused with
the field's description); `check` then tests what a schema cannot (end after start, a start not
in the future) before anything is read. A window that has not closed yet (its end plus the
flow's grace and disorder margin) is waited for, deferred, as the scheduled DAG waits. This file
only wires tasks (kafka_recon.airflow.wiring).
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import DAG, AssetAlias, Param, task

from kafka_recon.airflow.macros import MACROS
from kafka_recon.airflow.run_args import RunArgs
from kafka_recon.airflow.tasks import RECONCILED_ALIAS, begin, stage_tier
from kafka_recon.airflow.wiring import wait_for_closing, wire_run
from kafka_recon.config import load_flows_partial
from kafka_recon.settings import config_path

FLOWS = sorted(load_flows_partial(config_path())[0])  # a bad flow: see recon_config.py

with DAG(
    dag_id="recon_adhoc",
    description="Reconcile one flow over a chosen window",
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    default_args={"owner": "kafka-recon", "retries": 0},
    tags=["kafka-recon", "ad-hoc"],
    user_defined_macros=MACROS,
    params={
        "flow": Param(FLOWS[0] if FLOWS else "", type="string", enum=FLOWS,
                      title="Flow", description="A flow of the flow config."),
        "start": Param(type="string", format="date-time", title="Window start",
                       description="ISO 8601 with a time zone, e.g. 2026-11-20T00:00:00Z."),
        "end": Param(type="string", format="date-time", title="Window end",
                     description="ISO 8601 with a time zone, after the start."),
        "replays": Param(2, type="integer", minimum=1, maximum=10, title="Replays",
                         description="Replays of the topic, each under a fresh consumer group "
                                     "(1 to 10)."),
        "email": Param(True, type="boolean", title="Email the owners",
                       description="Mail the report to the flow's owners."),
    },
    doc_md=__doc__,
) as dag:
    args = RunArgs(flow="{{ params.flow }}", start="{{ params.start }}",
                   end="{{ params.end }}", config=str(config_path()),
                   replays="{{ params.replays }}", email="{{ params.email }}")

    @task
    def check(flow: str, start: str, end: str) -> list[str]:
        """What the form's schema cannot check; returns the tiers to stage."""
        from kafka_recon.airflow.tasks import check_adhoc

        return check_adhoc(flow, start, end)

    tiers = check(args.flow, args.start, args.end)
    staged = stage_tier.partial(flow=args.flow, start=args.start, end=args.end) \
        .expand(tier=tiers)
    tiers >> wait_for_closing(args) >> begin(args.flow, args.start, args.end) >> staged
    wire_run(args, staged, AssetAlias(RECONCILED_ALIAS))
