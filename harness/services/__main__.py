"""Command line of the dev environment.

    python -m harness.services kafka start [--dir D] [--port P] [--secured]   single node
        (--secured: SASL_SSL and mTLS listeners, an authorizer; status prints client settings)
    python -m harness.services cluster start [--dir D] [--ports P1,P2,P3]
    python -m harness.services cluster kill --node 2                SIGKILL one broker
    python -m harness.services cluster restart --node 2
    python -m harness.services {kafka,cluster} status|stop
    python -m harness.services smtp start|stop|status [--dir D] [--port P]

State lives in the folder given by --dir (default .devenv/<service>), so each command may run in
a new process. Exit code 2 with a one-line message when something is missing or taken.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness.services.base import JavaNotFoundError, pid_alive
from harness.services.kafka import KafkaCluster, KafkaStartError
from harness.services.kafka_security import Security
from harness.services.ports import PortInUseError, free_port, wait_open
from kafka_recon.settings import REPO_ROOT, MissingJarsError

DEFAULT_DIR = REPO_ROOT / ".devenv"


def _kafka(args: argparse.Namespace, size: int) -> dict[str, object]:
    base = args.dir or DEFAULT_DIR / ("kafka" if size == 1 else "cluster")
    ports = None
    if size == 1 and args.port:
        ports = [args.port]
    elif size == 3 and args.ports:
        ports = [int(p) for p in args.ports.split(",")]
    secured = getattr(args, "secured", False)
    cluster = KafkaCluster(base, size=size, ports=ports,
                           security=Security(base / "certs") if secured else None)
    if args.action == "start":
        cluster.start()
    elif args.action == "stop":
        cluster.stop()
    elif args.action == "kill":
        cluster.kill(args.node)
    elif args.action == "restart":
        cluster.restart(args.node)
    if cluster.state is None:
        return {"dir": str(base), "running": False}
    out = cluster.describe()
    if cluster.security is not None:  # what a flow's Kafka connection holds, for each listener
        out["clients"] = {"sasl_ssl": cluster.security.sasl(cluster.sasl_bootstrap),
                          "mtls": cluster.security.mtls(cluster.ssl_bootstrap)}
    return out


def _smtp(args: argparse.Namespace) -> dict[str, object]:
    base: Path = args.dir or DEFAULT_DIR / "smtp"
    state_path = base / "smtp.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    if args.action == "start":
        if pid_alive(state.get("pid")):
            raise KafkaStartError(f"an SMTP catcher already runs from {base} (pid {state['pid']})")
        port = args.port or free_port()
        base.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen(
            [sys.executable, "-m", "harness.services.smtp", "--dir", str(base / "mail"),
             "--port", str(port)],
            stdout=(base / "smtp.log").open("ab"), stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
        wait_open(port, 20, "smtp catcher")
        state = {"pid": proc.pid, "port": port, "maildir": str(base / "mail")}
        state_path.write_text(json.dumps(state))
    elif args.action == "stop" and pid_alive(state.get("pid")):
        os.kill(state["pid"], signal.SIGTERM)
        deadline = time.monotonic() + 10
        while pid_alive(state["pid"]) and time.monotonic() < deadline:
            time.sleep(0.1)
    return {**state, "running": pid_alive(state.get("pid"))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m harness.services",
                                description="Real services on loopback for kafka-recon.")
    sub = p.add_subparsers(dest="service", required=True)
    k = sub.add_parser("kafka", help="single-node KRaft Kafka")
    k.add_argument("action", choices=["start", "stop", "status"])
    k.add_argument("--dir", type=Path)
    k.add_argument("--port", type=int)
    k.add_argument("--secured", action="store_true", help="SASL_SSL, mTLS and ACLs too")
    c = sub.add_parser("cluster", help="three-broker KRaft cluster")
    c.add_argument("action", choices=["start", "stop", "status", "kill", "restart"])
    c.add_argument("--dir", type=Path)
    c.add_argument("--ports", help="three comma-separated broker ports")
    c.add_argument("--node", type=int, help="node id (1-3) for kill and restart")
    c.add_argument("--secured", action="store_true", help="SASL_SSL, mTLS and ACLs too")
    s = sub.add_parser("smtp", help="SMTP server keeping every message as a file")
    s.add_argument("action", choices=["start", "stop", "status"])
    s.add_argument("--dir", type=Path)
    s.add_argument("--port", type=int)
    args = p.parse_args(argv)
    if args.service == "cluster" and args.action in ("kill", "restart") and not args.node:
        p.error(f"cluster {args.action} needs --node")
    try:
        if args.service == "smtp":
            out = _smtp(args)
        else:
            out = _kafka(args, 1 if args.service == "kafka" else 3)
    except (JavaNotFoundError, MissingJarsError, PortInUseError, KafkaStartError,
            TimeoutError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
