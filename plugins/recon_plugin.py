"""Adds the "Reconciliation" page to the Airflow UI (Airflow 3: a FastAPI app and an external view).

The page lives in kafka_recon.faces.ui; this file only registers it. It requires Airflow's login.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from kafka_recon.faces.ui import PREFIX, create_app


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
