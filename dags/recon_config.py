# Airflow shows the flow config's errors as this DAG file's import errors: one line per bad
# flow (its DAG is skipped, every other flow keeps its own), or where no flow config was found
from kafka_recon.dags import refuse_bad_flows

refuse_bad_flows()
