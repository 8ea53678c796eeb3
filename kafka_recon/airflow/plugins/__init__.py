"""What kafka-recon adds to Airflow's own web server: the Reconciliation page."""
