"""Where a machine's CPU goes while a benchmark runs: every process's CPU time, sampled, summed
by the part of the setup it belongs to (told from its command line).

A fleet's verdicts on one machine are slowed by everything else on it; this says by how much
each part (the pipelines feeding the flows, Airflow, the Spark server, Kafka) took of the
cores, so that a target missed can be put down to its measured cause."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

# (part, words any of which in a command line marks it), first match wins
PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("pipelines", ("harness.drill.apps", "bench.feeder")),
    ("spark server", ("SparkConnectServer",)),
    ("kafka", ("kafka.Kafka",)),
    ("postgresql", ("postgres",)),
    # a task's processes are forked from the scheduler and retitled (Airflow's setproctitle)
    ("airflow tasks", ("airflow supervisor", "airflow worker --")),
    ("airflow scheduler", ("airflow scheduler",)),
    ("airflow triggerer", ("airflow triggerer",)),
    ("airflow dag-processor", ("airflow dag-processor",)),
    ("airflow api-server", ("airflow api-server", "airflow api_server", "uvicorn")),
    ("other jvm", ("java",)),
)


def part_of(cmdline: str, bench_pid: int, pid: int) -> str:
    """The part a process belongs to; the benchmark's own process writes the pipelines'
    upstream rows."""
    if pid == bench_pid:
        return "pipelines"
    return next((name for name, words in PARTS if any(w in cmdline for w in words)), "other")


@dataclass(frozen=True)
class Proc:
    cpu: float  # seconds, user and system
    started: str  # the process's start time, in clock ticks after boot: a reused pid differs
    cmdline: str


def read_procs(root: str = "/proc") -> dict[int, Proc]:
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, Proc] = {}
    for name in os.listdir(root):
        if not name.isdigit():
            continue
        try:
            with open(f"{root}/{name}/stat") as fh:
                stat = fh.read()
            with open(f"{root}/{name}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # ended meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(name)] = Proc((int(fields[11]) + int(fields[12])) / tick, fields[19], cmd)
    return out


def spent(before: dict[int, Proc], after: dict[int, Proc]) -> dict[int, float]:
    """CPU seconds each process spent between two readings: a process new since `before`
    (or a pid reused) counts from its start."""
    out = {}
    for pid, p in after.items():
        old = before.get(pid)
        base = old.cpu if old is not None and old.started == p.started else 0.0
        if p.cpu > base:
            out[pid] = p.cpu - base
    return out


@dataclass
class CpuSampler:
    """Samples every `every` seconds in a thread, from `start()` to `stop()`. What a process
    spends after its last sample and before it ends is not seen (a short task's last
    seconds): the sums are a lower bound."""

    every: float = 2.0
    by_part: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> CpuSampler:
        self._thread = threading.Thread(target=self._run, daemon=True, name="cpu-sampler")
        self._thread.start()
        return self

    def _run(self) -> None:
        me = os.getpid()
        began = time.monotonic()
        last = read_procs()
        while not self._stop.wait(self.every):
            now = read_procs()
            for pid, cpu in spent(last, now).items():
                part = part_of(now[pid].cmdline, me, pid)
                self.by_part[part] = self.by_part.get(part, 0.0) + cpu
            last = now
            self.seconds = time.monotonic() - began

    def stop(self) -> dict[str, object]:
        self._stop.set()
        if self._thread:
            self._thread.join(30)
        total = sum(self.by_part.values())
        return {"seconds": round(self.seconds),
                "cores_busy": round(total / self.seconds, 2) if self.seconds else None,
                "cpu_seconds": {k: round(v) for k, v in
                                sorted(self.by_part.items(), key=lambda kv: -kv[1])}}
