"""The faces people use: the command line, the Airflow tasks, the Reconciliation page."""
