"""Real services on loopback for the demo, the tests and the drills.

Kafka (single node or a three-broker KRaft cluster) and an SMTP server that keeps every
message as a file. Nothing here is a mock: the broker is Apache Kafka from Maven Central.
"""

from harness.services.kafka import KafkaCluster, KafkaNode
from harness.services.ports import free_port
from harness.services.smtp import MailCatcher

__all__ = ["KafkaCluster", "KafkaNode", "MailCatcher", "free_port"]
