"""kafka-recon's database: what runs on different hosts share (the history, the windows'
leases). One SQLAlchemy URL or Airflow connection (`KAFKA_RECON_STORE`); SQLite in the runs root
on a single host."""
