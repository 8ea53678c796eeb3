"""kafka-recon in Airflow, laid out as a provider package is.

- `operators/`: the Spark step's operator (spark-submit, or a Spark Connect server), which
  resolves the flow's connections in the task and hands them to the job, and its lineage;
- `tasks.py`: the bodies of the run's other tasks (TaskFlow), each one call into
  `kafka_recon.orchestrate`;
- `wiring.py`: how those tasks are put together into one run, for the DAG files;
- `macros.py` and `run_args.py`: what the templates render when a task runs;
- `plugins/`: the Reconciliation page (a FastAPI app) and the plugin that registers it;
- `names.py`: the names kafka-recon gives things in Airflow, spelled once.

Connections are resolved by `kafka_recon.sources.connections` (Airflow's own lookup first, inside
a task): the command line and the Spark jobs resolve them too, outside Airflow.
"""
