"""The Kafka cluster's side of a run, beside the tiers' readers: the preflight of
kafka-recon's rights, the audit of the cluster's and clients' settings, the flight recorder
(snapshots of partitions and consumer groups, and their store), and a mirror's progress."""
