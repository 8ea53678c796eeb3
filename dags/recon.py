# Airflow DAGs of kafka-recon: a scheduled reconciliation per flow of the flow config,
# recon_adhoc and recon_snapshots (kafka_recon.dags builds them; this file only publishes them)
from kafka_recon.dags import flow_dags

globals().update(flow_dags())
