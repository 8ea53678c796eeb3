"""kafka-recon: find, count and locate records lost between an upstream, Kafka and a sink."""

__version__ = "0.1.0"
