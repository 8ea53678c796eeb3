"""What proves and demonstrates kafka-recon, apart from what ships: local services on loopback
(`services`), the loss drill (`drill`) and the demo (`demo`). Never imported by `kafka_recon`."""
