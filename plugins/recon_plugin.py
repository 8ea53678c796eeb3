"""kafka-recon's Reconciliation page for an Airflow whose plugins folder is this one.

An installed kafka-recon needs no file here: Airflow finds the plugin through the package's
`airflow.plugins` entry point. This file serves an Airflow that imports kafka-recon from a path
without installing it, and defines no plugin where the entry point exists: Airflow counts a
plugin registered twice as an import error ("1 Plugin Import Error" on its home page).
"""

from __future__ import annotations

from importlib.metadata import entry_points

if not any(ep.value.startswith("kafka_recon.") for ep in entry_points(group="airflow.plugins")):
    from kafka_recon.airflow.plugins.reconciliation import ReconciliationPlugin

    __all__ = ["ReconciliationPlugin"]
