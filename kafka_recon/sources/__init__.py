"""The readers of a flow's tiers: SQL databases, Flume agents' counters, Kafka topics (and the
schema registry their records name), and the connections that reach them."""
