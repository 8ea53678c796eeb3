"""What every local service of the harness shares: one lifecycle, and the process helpers.

A service is started with `start()` (which returns it, so `with Service(...).start()` and
`with Service(...)` both work), stopped with `stop()` (safe to call twice, and after a failed
start), and says what went wrong in one line through a `ServiceError`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Self


class ServiceError(RuntimeError):
    """A local service that could not start or stop; the message says which and why."""


class JavaNotFoundError(ServiceError):
    pass


class Service(ABC):
    @abstractmethod
    def start(self) -> Self:
        """Start and wait until the service answers; raise a ServiceError otherwise."""

    @abstractmethod
    def stop(self) -> None:
        """Stop whatever runs; a service that is not running is left as it is."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def java_binary() -> str:
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home, "bin", "java") if java_home else None
    if candidate and candidate.exists():
        return str(candidate)
    found = shutil.which("java")
    if not found:
        raise JavaNotFoundError(
            "java not found: install a JDK 17 (Debian: openjdk-17-jdk-headless) or set JAVA_HOME"
        )
    return found


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child still answers kill(0); ask /proc whether it really runs
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def wait_dead(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            # reap it if it is our child; otherwise just poll
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                return True
        except ChildProcessError:
            pass
        if not pid_alive(pid):
            return True
        time.sleep(0.1)
    return not pid_alive(pid)


def kill_now(pid: int | None) -> None:
    """SIGKILL a service's process group, as a crash would, and wait for it to go."""
    import signal

    if pid and pid_alive(pid):
        os.killpg(pid, signal.SIGKILL)
        wait_dead(pid, 30)


def terminate(pid: int | None, timeout: float = 30) -> None:
    """SIGTERM a service's process group (resumed first, if paused), SIGKILL if it stays."""
    import signal

    if pid and pid_alive(pid):
        os.killpg(pid, signal.SIGCONT)
        os.killpg(pid, signal.SIGTERM)
        if not wait_dead(pid, timeout):
            os.killpg(pid, signal.SIGKILL)
            wait_dead(pid, 10)
