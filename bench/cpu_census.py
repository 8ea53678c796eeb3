"""Where a command's CPU goes, by kind of process: `python -m bench.cpu_census --out F -- make
test`. `make test` spends about 60 CPU-minutes in 50 wall-minutes on 2 cores; to bring it under
its 40-minute goal one must know which processes spend them (Kafka brokers, Spark drivers,
Airflow's components, pytest workers, databases).

Every `--every` seconds it reads the cumulative CPU of each process the command started (at
any depth; the census makes itself their reaper, so a server that daemonizes stays one of
them) and keeps each process's last figure under its kind; a process that ends between two
readings loses at most that interval's CPU. Writes one JSON file: the command, its exit code,
wall seconds, and CPU seconds per kind, largest first."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

SCHEMA_VERSION = 1

# first match wins: the pattern is searched in the process's command line
KINDS = (
    ("kafka broker", r"kafka\.Kafka\b"),
    ("spark connect server", r"SparkConnectServer|spark-connect|connect\.service"),
    ("spark standalone", r"deploy\.master\.Master|deploy\.worker\.Worker"),
    ("spark driver (JVM)", r"org\.apache\.spark\.deploy\.SparkSubmit"),
    ("other JVM", r"\bjava\b"),
    ("airflow scheduler", r"airflow scheduler"),
    ("airflow dag-processor", r"airflow dag-processor"),
    ("airflow api-server", r"airflow api-server|uvicorn"),
    ("airflow triggerer", r"airflow triggerer"),
    ("airflow celery worker", r"airflow celery"),
    ("airflow task", r"airflow\.sdk|task-runner|supervisor|airflow tasks|airflow dags test"),
    ("airflow command", r"bin/airflow\b"),
    ("pytest", r"pytest|xdist"),
    ("kafka-recon CLI", r"kafka-recon|kafka_recon"),
    ("pyspark worker", r"pyspark"),
    ("python (other)", r"python"),
    ("postgres", r"postgres"),
    ("mariadb", r"mariadb|mysqld"),
    ("redis", r"redis-server"),
    ("chromium", r"chrom"),
    ("pip/uv", r"\buv\b|pip"),
    ("maven", r"mvn|maven"),
)


def kind(cmdline: str) -> str:
    for name, pattern in KINDS:
        if re.search(pattern, cmdline):
            return name
    return cmdline.split(" ", 1)[0].rsplit("/", 1)[-1][:30] or "?"


def _cpu(p: psutil.Process) -> tuple[float, str] | None:
    try:
        t = p.cpu_times()
        return t.user + t.system, " ".join(p.cmdline())
    except (psutil.Error, OSError):
        return None


def _subreaper() -> None:
    """Become the reaper of every orphan the command leaves (a server that daemonizes, as
    pg_ctl's does), so that it stays a descendant and is counted."""
    import ctypes

    pr_set_child_subreaper = 36
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_child_subreaper, 1, 0, 0, 0)


def census(command: list[str], every: float, out: Path) -> int:
    _subreaper()
    me = psutil.Process()
    last: dict[tuple[int, float], tuple[float, str]] = {}
    done = threading.Event()
    proc = subprocess.Popen(command)

    def sample() -> None:
        while not done.wait(every):
            for p in me.children(recursive=True):
                try:
                    key = (p.pid, p.create_time())
                    if p.pid != proc.pid and p.status() == psutil.STATUS_ZOMBIE:
                        os.waitpid(p.pid, os.WNOHANG)  # an orphan that ended: ours to reap
                        continue
                except (psutil.Error, ChildProcessError):
                    continue
                got = _cpu(p)
                if got is not None:
                    last[key] = got

    sampler = threading.Thread(target=sample, daemon=True)
    start = time.monotonic()
    sampler.start()
    code = proc.wait()
    done.set()
    sampler.join()
    by_kind: dict[str, float] = {}
    count: dict[str, int] = {}
    for cpu, cmdline in last.values():
        k = kind(cmdline)
        by_kind[k] = by_kind.get(k, 0.0) + cpu
        count[k] = count.get(k, 0) + 1
    wall = time.monotonic() - start
    doc = {"schema_version": SCHEMA_VERSION, "command": command, "exit_code": code,
           "wall_s": round(wall, 1), "cpu_s": round(sum(by_kind.values()), 1),
           "every_s": every,
           "kinds": [{"kind": k, "cpu_s": round(v, 1), "processes": count[k]}
                     for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1])
                     if v >= 0.05]}
    out.write_text(json.dumps(doc, indent=1) + "\n")
    return code


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.cpu_census", description=__doc__)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--every", type=float, default=2.0)
    ap.add_argument("command", nargs="+")
    args = ap.parse_args(argv)
    return census(args.command, args.every, args.out)


if __name__ == "__main__":
    sys.exit(main())
