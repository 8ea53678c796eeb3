"""kafka-recon: find, count and locate records lost between an upstream, a Kafka topic and a sink."""

__version__ = "0.1.0"
