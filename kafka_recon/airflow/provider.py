"""kafka-recon's provider metadata: what `airflow providers list` and `airflow config list` show.

Read through the `apache_airflow_provider` entry point. kafka-recon defines no connection type of
its own: it uses those of the providers it depends on, listed under `connection-types-used`; its
plugin is also registered through the `airflow.plugins` entry point. The `[kafka_recon]` options
are generated from `kafka_recon.settings.SETTINGS`, so Airflow documents the same keys the
settings read.
"""

from __future__ import annotations

from typing import Any

from kafka_recon import __version__
from kafka_recon.settings import SECTION, SETTINGS

# (connection type, what uses it): every kind of connection a flow or a deployment may name
CONNECTION_TYPES_USED = (
    ("kafka", "a kafka tier's `conn`: the librdkafka settings (apache-kafka provider)"),
    ("postgres", "a sql tier's `conn`, or the history store"),
    ("mysql", "a sql tier's `conn` (MySQL or MariaDB)"),
    ("mariadb", "a sql tier's `conn` (MariaDB)"),
    ("sqlite", "a sql tier's `conn`, or the history store"),
    ("spark", "`spark_default`: the master spark-submit sends each Spark step to"),
    ("smtp", "`smtp_default`: the mail that carries a run's report to its owners"),
    ("slack", "an alert's Slack incoming webhook"),
    ("pagerduty_events", "an alert's PagerDuty Events API v2 routing key"),
)


def get_provider_info() -> dict[str, Any]:
    options = {
        s.key: {"description": f"{s.what}. Environment: {s.var}.", "version_added": "0.1.0",
                "type": "string", "example": None, "default": None,
                # a history URL may carry a password: Airflow then reads it from _SECRET / _CMD
                **({"sensitive": True} if s.key == "history" else {})}
        for s in SETTINGS if s.key
    }
    return {
        "package-name": "kafka-recon",
        "name": "kafka-recon",
        "description": "Reconciles each flow's upstream, Kafka topic and sink record by record: "
                       "where records were lost or duplicated, how many, exactly which, why.",
        "versions": [__version__],
        "integrations": [{"integration-name": "kafka-recon", "tags": ["software"]}],
        "operators": [{"integration-name": "kafka-recon",
                       "python-modules": ["kafka_recon.airflow.operators.begin",
                                          "kafka_recon.airflow.operators.spark_submit"]}],
        "plugins": [{"name": "kafka_recon",
                     "plugin-class": "kafka_recon.airflow.plugins.reconciliation."
                                     "ReconciliationPlugin"}],
        "config": {SECTION: {"description": "Where kafka-recon finds its flow config and keeps "
                                            "its runs, history and snapshots; an environment "
                                            "variable of the same setting wins.",
                             "options": options}},
        "connection-types-used": [{"connection-type": t, "used-for": why}
                                  for t, why in CONNECTION_TYPES_USED],
    }
