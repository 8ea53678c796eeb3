"""Kafka Connect's REST API read for a connector, over real HTTP from a small local server that
answers as a Connect worker does (the real worker is in tests/integration/test_connect.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from kafka_recon.config import Connector
from kafka_recon.sources.connect import api_of, snapshot

pytestmark = pytest.mark.unit

ANSWERS: dict[str, Any] = {
    "/connectors/load/config": {"connector.class": "x.Sink", "errors.tolerance": "all",
                                "errors.deadletterqueue.topic.name": "orders.dlq",
                                "connection.password": "secret"},
    "/connectors/load/status": {"name": "load", "connector": {"state": "RUNNING"},
                                "tasks": [{"id": 0, "state": "FAILED", "worker_id": "w:8083",
                                           "trace": "java.lang.RuntimeException: x\n\tat y"}]},
    "/connectors/load/offsets": {"offsets": [
        {"partition": {"kafka_topic": "t", "kafka_partition": 0},
         "offset": {"kafka_offset": 42}}]},
}


class _Worker(BaseHTTPRequestHandler):
    seen: list[tuple[str, str | None]] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        _Worker.seen.append((self.path, self.headers.get("Authorization")))
        body = ANSWERS.get(self.path)
        code = 200 if body is not None else 404
        data = json.dumps(body if body is not None else
                          {"error_code": 404, "message": "Connector nope not found"}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def worker() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Worker)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Worker.seen = []
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_a_connectors_config_status_and_offsets_are_read_with_basic_auth(worker: str) -> None:
    url = worker.replace("http://", "http://ops:p%40ss@")
    snap = snapshot(Connector(name="load", url=url), "warehouse", "sink")
    assert snap.error is None and snap.cluster == worker  # no password kept
    assert snap.config["connection.password"] == "[hidden]"
    assert snap.dead_letter_topic == "orders.dlq" and snap.tolerance == "all"
    assert [t.said for t in snap.failed] == ["task 0 FAILED: java.lang.RuntimeException: x"]
    assert snap.sink_offsets() == {"t": {0: 42}}
    assert {auth for _, auth in _Worker.seen} == {"Basic b3BzOnBAc3M="}  # ops:p@ss


def test_an_unknown_connector_is_kept_as_an_error_naming_it(worker: str) -> None:
    snap = snapshot(Connector(name="nope", url=worker), "warehouse", "sink")
    assert snap.error == (f"Kafka Connect at {worker}: GET /connectors/nope/config answered "
                          "404: Connector nope not found")


def test_a_cluster_that_does_not_answer_is_kept_as_an_error() -> None:
    snap = snapshot(Connector(name="load", url="http://127.0.0.1:9"), "warehouse", "sink")
    assert snap.error and snap.error.startswith("Kafka Connect at http://127.0.0.1:9 did not "
                                                "answer GET /connectors/load/config")


def test_an_airflow_http_connection_gives_the_address_and_login(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_CONNECT_PROD", json.dumps({
        "conn_type": "http", "host": "connect.internal", "port": 8443, "schema": "https",
        "login": "recon", "password": "pw"}))
    api = api_of(Connector(name="load", conn="connect_prod"))
    assert api.base == "https://connect.internal:8443"
    assert api.auth == "Basic cmVjb246cHc="
