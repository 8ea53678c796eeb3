"""The flow config's errors, as Airflow import errors of this file: one per bad flow.

The DAG files build a DAG for every valid flow and skip the bad ones, so one mistake in one
flow never hides every other flow's DAG. This file makes the skipped flows visible: it fails to
import, naming each bad flow and what is wrong with it, and Airflow shows that on its import
errors page. It defines no DAG.
"""

from __future__ import annotations

from kafka_recon.config import load_flows_partial
from kafka_recon.errors import ConfigError
from kafka_recon.settings import config_path

_errors = load_flows_partial(config_path())[1]
if _errors:
    raise ConfigError(f"{len(_errors)} flow(s) of the flow config have no DAG: "
                      + " | ".join(f"flow '{n}': {e}" if n != "(file)" else e
                                   for n, e in sorted(_errors.items())))
