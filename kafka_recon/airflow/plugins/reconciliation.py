"""Adds the "Reconciliation" page to the Airflow UI (Airflow 3: a FastAPI app and an external
view; the page is `kafka_recon.airflow.plugins.ui`, behind Airflow's login), and the listener
that makes the replays' pools when a run first needs them (`kafka_recon.airflow.plugins.pools`)."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from kafka_recon.airflow.links import PREFIX, WindowPageLink
from kafka_recon.airflow.plugins import pools, run_notes
from kafka_recon.airflow.plugins.ui import create_app


class ReconciliationPlugin(AirflowPlugin):
    name = "kafka_recon"
    fastapi_apps = [{"app": create_app(), "url_prefix": PREFIX, "name": "kafka-recon"}]
    external_views = [{
        "name": "Reconciliation",
        "href": f"{PREFIX}/",
        "destination": "nav",
        "category": "browse",
        "url_route": "reconciliation",
    }]
    listeners = [pools, run_notes]
    # the link from a run's tasks to its window's page (the Spark step and the verdict)
    operator_extra_links = [WindowPageLink()]
