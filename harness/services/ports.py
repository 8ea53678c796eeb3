"""Loopback ports: pick free ones, or check that a configured one is free."""

from __future__ import annotations

import socket
import time

HOST = "127.0.0.1"


class PortInUseError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def ensure_free(port: int, what: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
        except OSError as exc:
            raise PortInUseError(f"{what}: port {HOST}:{port} is already in use ({exc})") from exc
    return port


def is_open(port: int, host: str = HOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def wait_open(port: int, timeout: float, what: str, host: str = HOST) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if is_open(port, host):
            return
        time.sleep(0.2)
    raise TimeoutError(f"{what}: nothing listens on {host}:{port} after {timeout:.0f}s")
