"""kafka-recon's Reconciliation page for an Airflow whose plugins folder is this one.

An installed kafka-recon needs no file here: Airflow finds the plugin through the package's
`airflow.plugins` entry point (and skips this copy by name). The file serves an Airflow that
imports kafka-recon from a path without installing it.
"""

from __future__ import annotations

from kafka_recon.airflow.plugins.reconciliation import ReconciliationPlugin

__all__ = ["ReconciliationPlugin"]
