"""kafka-recon's sensors."""
