"""A tier's Kafka Connect connector in the flow config: where it may stand, what it needs."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_recon.config import ConfigError, Flow, load_flow

pytestmark = pytest.mark.unit

FLOW = """
flows:
  orders:
    owners: [a@example.com]
    record: {{id: "$.id", event_time: "$.t", envelope: debezium}}
    tolerance: {{dead_lettered: "100%"}}
    tiers:
      - {{name: db, type: sql, conn: "sqlite:///x.db",
         ids: "SELECT id, t AS event_time FROM o WHERE t >= :start AND t < :end"{db}}}
      - {{name: cdc, type: kafka, bootstrap: "b:9092", topic: shop.public.orders{cdc}}}
      - {{name: sink, type: sql, conn: sink_db,
         ids: "SELECT id, t AS event_time FROM c WHERE t >= :start AND t < :end"{sink}}}
"""
SOURCE = ', connector: {name: shop-cdc, url: "http://connect:8083"}'
SINK = ', connector: {name: load, conn: connect_prod, dead_letter_topic: orders.dlq}'


def flow(tmp_path: Path, db: str = "", cdc: str = SOURCE, sink: str = SINK) -> Flow:
    p = tmp_path / "flows.yaml"
    p.write_text(FLOW.format(db=db, cdc=cdc, sink=sink))
    return load_flow(p, "orders")


def test_a_source_on_its_topic_and_a_sink_after_it_are_declared(tmp_path: Path) -> None:
    f = flow(tmp_path)
    assert set(f.connectors) == {"cdc", "sink"}
    sink = f.sink_connector("sink")
    assert sink.consumer_group == "connect-load" and sink.dead_letter_topic == "orders.dlq"
    assert f.sink_connector("cdc") is None
    assert f.tolerance.allowed("dead_lettered", 7) == 7


def test_a_sink_connector_needs_a_topic_right_before_its_tier(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="tier 'db': its connector is a sink connector"):
        flow(tmp_path, db=', connector: {name: x, url: "http://c:8083"}')


def test_a_source_connector_has_no_dead_letter_queue(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="a source connector has no dead-letter queue"):
        flow(tmp_path, cdc=', connector: {name: x, url: "http://c:8083", '
                           'dead_letter_topic: q}')


def test_a_connector_names_its_cluster(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="field 'tiers.2.sql.connector': .*give 'url'"):
        flow(tmp_path, sink=", connector: {name: load}")
    with pytest.raises(ConfigError, match="connector.url': .*http:// or https://, got "
                                          "'connect:8083'"):
        flow(tmp_path, sink=', connector: {name: load, url: "connect:8083"}')
