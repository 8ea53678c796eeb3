from __future__ import annotations

import socket
from pathlib import Path

import pytest

from harness.services.base import JavaNotFoundError, java_binary
from harness.services.ports import HOST, PortInUseError, ensure_free
from kafka_recon.settings import MissingJarsError, kafka_classpath, spark_jars

pytestmark = pytest.mark.unit


def test_a_taken_port_is_named_in_the_error() -> None:
    with socket.socket() as s:
        s.bind((HOST, 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(PortInUseError, match=f"kafka node 1: port {HOST}:{port} is already"):
            ensure_free(port, "kafka node 1")


def test_missing_jars_say_how_to_get_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_RECON_JARS", str(tmp_path))
    with pytest.raises(MissingJarsError, match="run `make jars`"):
        kafka_classpath()


def test_a_missing_window_reader_says_how_to_build_it(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "kafka-clients-3.9.0.jar").write_bytes(b"")
    monkeypatch.setenv("KAFKA_RECON_SPARK_JARS", str(tmp_path))
    with pytest.raises(MissingJarsError, match="no kafka-recon-reader.jar in .*run `make reader`"):
        spark_jars()


def test_missing_java_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(JavaNotFoundError, match="install a JDK 17"):
        java_binary()
