"""spark-submit entry points: argument parser → the step in kafka_recon.spark (thin)."""
