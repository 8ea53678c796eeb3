"""Where records are read and counted: SQL databases, Flume agents, the Kafka topic, and the
audit of the cluster and clients."""
