"""Hosts that share nothing but the network, made the way a test lab makes them (root only).

`Lab` is a bridge in the root network namespace with an address of its own (where the shared
services listen: Kafka, PostgreSQL, Redis, the S3 server, Airflow's api-server, Spark's
master); each `Host` is a network namespace joined to the bridge by a veth pair, with an
address on the bridge's subnet. A process started on a host (`Host.spawn`) also gets its own
mount namespace with a private, empty `/tmp` (its working folder lives there) and its own host
name: it sees none of another host's files, and reaches the others only through the network.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
from pathlib import Path
from typing import Self

from harness.services.base import Service, ServiceError, terminate


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ServiceError(f"ip {' '.join(args)}: {done.stderr.strip()}")


class Host:
    def __init__(self, lab: Lab, name: str, address: str, veth: str = "") -> None:
        self.lab, self.name, self.address = lab, name, address
        self.netns = f"{lab.prefix}-{name}"
        self.veth = veth  # its end of the pair on the bridge
        self.procs: list[subprocess.Popen[bytes]] = []

    def command(self, argv: list[str], setup: str = "") -> list[str]:
        """`argv` on this host: its network namespace, a mount namespace of its own with a
        private /tmp, its host name; `setup` (shell) runs first, there (e.g. copying in what a
        deployment would ship)."""
        script = (f"mount --make-rprivate / && {self._private_tmp()} && "
                  f"hostname {shlex.quote(self.name)} && {setup or 'true'} && exec \"$@\"")
        return ["ip", "netns", "exec", self.netns, "unshare", "--mount", "--uts", "sh", "-c",
                script, "sh", *argv]

    def _private_tmp(self) -> str:
        """An empty /tmp of the host's own; what the lab keeps (the software installed, which a
        real host has on its own disk) stays at its path even when that lies under /tmp (a
        checkout cloned there): held by a bind mount across the new /tmp."""
        steps = []
        kept = [str(k) for k in self.lab.keep if str(k).startswith("/tmp/")]
        for i, path in enumerate(kept):
            hold = f"/run/{self.netns}-keep{i}"
            steps += [f"mkdir -p {hold}", f"mount --bind {shlex.quote(path)} {hold}"]
        steps.append("mount -t tmpfs tmpfs /tmp")
        for i, path in enumerate(kept):
            hold = f"/run/{self.netns}-keep{i}"
            steps += [f"mkdir -p {shlex.quote(path)}", f"mount --bind {hold} {shlex.quote(path)}",
                      f"umount {hold}", f"rmdir {hold}"]
        return " && ".join(steps)

    def spawn(self, argv: list[str], env: dict[str, str], log: Path,
              setup: str = "") -> subprocess.Popen[bytes]:
        log.parent.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen(self.command(argv, setup), env=env, stdout=log.open("ab"),
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def pids(self) -> list[int]:
        """Every process in the host's network namespace, whatever session it started."""
        out = subprocess.run(["ip", "netns", "pids", self.netns], capture_output=True,
                             text=True, check=False).stdout
        return [int(p) for p in out.split()]

    def kill(self) -> None:
        """Every process of the host at once (the tasks' own sessions and their Spark drivers
        too): as a host that lost its power."""
        import signal

        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for p in self.procs:
            p.wait(30)

    def cut(self) -> None:
        """The host's cable pulled: its link to the bridge down, so it reaches nothing (the
        brokers, the databases, the S3 server, Airflow) and nothing reaches it; its processes
        run on."""
        _ip("link", "set", self.veth, "down")

    def mend(self) -> None:
        _ip("link", "set", self.veth, "up")

    def stop(self) -> None:
        for p in self.procs:
            terminate(p.pid, timeout=30)
        self.kill()  # what left the processes' sessions (a task's, a Spark driver)
        self.procs.clear()


class Lab(Service):
    """A bridge `<prefix>br` at 10.<subnet>.0.1/24 and its hosts at .2, .3, ..."""

    def __init__(self, prefix: str = "recon", subnet: int = 77,
                 keep: list[Path] | None = None) -> None:
        """`keep`: folders every host still sees where they are (the software installed)."""
        self.prefix, self.subnet = prefix, subnet
        self.keep = [p.resolve() for p in keep or []]
        self.bridge = f"{prefix}br"
        self.address = f"10.{subnet}.0.1"
        self.hosts: list[Host] = []

    def start(self) -> Self:
        if os.geteuid() != 0:
            raise ServiceError("a lab of network namespaces needs root")
        self.stop()  # what an earlier, killed test left
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.address}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        return self

    def host(self, name: str) -> Host:
        """A new host on the bridge, with its own network namespace and address."""
        veth, peer = f"{self.prefix}{len(self.hosts)}", f"{self.prefix}{len(self.hosts)}p"
        h = Host(self, name, f"10.{self.subnet}.0.{len(self.hosts) + 2}", veth)
        _ip("netns", "add", h.netns)
        _ip("link", "add", veth, "type", "veth", "peer", "name", peer)
        _ip("link", "set", peer, "netns", h.netns)
        _ip("link", "set", veth, "master", self.bridge)
        _ip("link", "set", veth, "up")
        _ip("netns", "exec", h.netns, "ip", "addr", "add", f"{h.address}/24", "dev", peer)
        _ip("netns", "exec", h.netns, "ip", "link", "set", peer, "up")
        _ip("netns", "exec", h.netns, "ip", "link", "set", "lo", "up")
        self.hosts.append(h)
        return h

    def stop(self) -> None:
        for h in self.hosts:
            h.stop()
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                                check=False).stdout
        for line in listed.splitlines():
            name = line.split()[0] if line.split() else ""
            if name.startswith(f"{self.prefix}-"):
                subprocess.run(["ip", "netns", "del", name], check=False)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, check=False)
        self.hosts.clear()


def address() -> str:
    """A lab host's own address, as Airflow's `[core] hostname_callable` on a worker there
    (`harness.services.lab.address`): the api-server reaches the worker's log server by it, as
    it would by a DNS name on a real network."""
    return os.environ["LAB_HOST_ADDRESS"]
