"""The operators of kafka-recon's DAGs."""
