"""What an open transaction makes a run say: which partitions it holds back, the offsets, who
holds it and the fix; and when a partition counts as held back at all."""

from __future__ import annotations

import pytest

from kafka_recon.cluster import transactions
from kafka_recon.cluster.transactions import Blocked, OpenTransaction, TransactionOpen
from kafka_recon.sources.kafka_client import KafkaEndpoint
from kafka_recon.sources.topic import PartitionRange

pytestmark = pytest.mark.unit

EP = KafkaEndpoint("b1:9092")
OPEN = OpenTransaction(partition=0, producer_id=12, producer_epoch=3, first_offset=11,
                       last_timestamp_ms=1_796_659_032_206, transactional_id="dying-app",
                       state="Ongoing", timeout_ms=45_000, started_ms=1_796_659_032_212)


def test_the_reason_names_partition_offsets_transaction_and_fix() -> None:
    text = str(TransactionOpen("orders", [Blocked(0, 11, 24, [OPEN])], 60.2))
    assert text.startswith("an open transaction holds back the read of topic 'orders' "
                           "(open_transaction; waited 60 s): ")
    assert ("partition 0 of 'orders': last stable offset 11, high watermark 24: held by "
            "transactional id 'dying-app' (producer id 12, epoch 3), open since "
            "2026-12-07T15:57:12.212Z from offset 11, transaction.timeout.ms 45000") in text
    assert "kafka-transactions.sh" in text and "re-run the window" in text


def test_a_transaction_whose_id_may_not_be_described_is_named_by_its_producer() -> None:
    hidden = OpenTransaction(partition=1, producer_id=12, producer_epoch=3, first_offset=5,
                             last_timestamp_ms=1_796_659_032_206)
    assert hidden.text() == ("producer id 12 (epoch 3; its transactional id is not visible: "
                             "DESCRIBE on TransactionalId), open since 2026-12-07T15:57:12.206Z "
                             "from offset 5")
    assert "could not be described" in Blocked(1, 5, 9).text("orders")


@pytest.mark.parametrize(("end", "lso", "hw", "held"), [
    (11, 11, 24, True),    # the read stops at the open transaction: records past it hidden
    (8, 11, 24, False),    # the window ends before the transaction began
    (24, 24, 24, False),   # nothing open
    (0, 0, 0, False),      # an empty partition
])
def test_a_partition_is_held_back_only_when_its_read_reaches_an_open_transaction(
        monkeypatch: pytest.MonkeyPatch, end: int, lso: int, hw: int, held: bool) -> None:
    monkeypatch.setattr(transactions, "stable_offsets", lambda ep, topic, parts: {0: (lso, hw)})
    ranges = [PartitionRange(0, 0, end, 0, min(end, hw))]
    assert bool(transactions.blocked_partitions(EP, "orders", ranges)) is held


def test_a_java_properties_value_keeps_its_backslashes_and_line_breaks() -> None:
    assert transactions._escaped("a\\b\nc") == "a\\\\b\\nc"
