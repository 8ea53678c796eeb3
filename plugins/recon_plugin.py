"""Registers kafka-recon's Reconciliation page with an Airflow whose plugins folder is this one.

The plugin itself ships in the package (kafka_recon.airflow.plugins.reconciliation); this file
only makes Airflow's plugins folder find it.
"""

from __future__ import annotations

from kafka_recon.airflow.plugins.reconciliation import ReconciliationPlugin

__all__ = ["ReconciliationPlugin"]
