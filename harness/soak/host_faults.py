"""The faults of the soak on two hosts, as data, beside the pipeline's own (`faults.py`).

Each takes the deployment (`Deployed`: the lab's worker hosts, Airflow, the S3 server, the
store's PostgreSQL, the cluster, the pipelines) and a random source, strikes, waits for the
fault to be over, and returns a note for the table. A pipeline fault strikes one flow's
pipeline, chosen at random.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from harness.live import LivePipeline
from harness.services.airflow import AirflowServers
from harness.services.kafka import KafkaCluster
from harness.services.lab import Host
from harness.services.postgres import PostgresServer
from harness.services.s3 import S3Server
from harness.soak import faults as pipeline_faults


class Deployed(Protocol):
    workers: list[Host]
    airflow: AirflowServers
    s3: S3Server
    store: PostgresServer
    cluster: KafkaCluster
    pipelines: dict[str, LivePipeline]

    def spark_step_host(self, wait_s: float) -> tuple[Host, str] | None:
        """The worker host running a Spark step now and whose step it is (the DAG and its run),
        waiting up to `wait_s` for one."""

    def revive_worker(self, host: Host) -> None:
        """The host's Celery worker started again (the host came back)."""


@dataclass(frozen=True)
class HostFault:
    name: str
    what: str
    act: Callable[[Deployed, random.Random], str]


def _target(d: Deployed, rnd: random.Random, wait_s: float) -> tuple[Host, str | None]:
    """The host running a Spark step, with whose step it is; one at random when none ran
    within `wait_s`."""
    step = d.spark_step_host(wait_s=wait_s)
    if step is None:
        return rnd.choice(d.workers), None
    return step[0], f"while it ran the Spark step of {step[1]}"


def host_killed(d: Deployed, rnd: random.Random) -> str:
    host, during = _target(d, rnd, wait_s=300)
    during = during or "(no Spark step ran within 5 minutes)"
    host.kill()
    down = rnd.uniform(20, 60)
    time.sleep(down)
    d.revive_worker(host)
    return (f"host {host.name} killed whole {during}, its worker started again after "
            f"{down:.0f} s")


def network_cut(d: Deployed, rnd: random.Random) -> str:
    host, during = _target(d, rnd, wait_s=60)
    host.cut()
    try:
        time.sleep(60)
    finally:
        host.mend()
    return (f"host {host.name}'s network cut for 60 s (from the brokers, the store, S3, "
            f"Airflow){f' {during}' if during else ''}")


def s3_restart(d: Deployed, rnd: random.Random) -> str:
    d.s3.kill()
    down = rnd.uniform(5, 20)
    time.sleep(down)
    d.s3.start()
    return f"the S3 server killed, started again after {down:.0f} s"


def store_restart(d: Deployed, rnd: random.Random) -> str:
    d.store.crash()
    down = rnd.uniform(5, 20)
    time.sleep(down)
    d.store.start()
    return f"the store's PostgreSQL crashed (immediate stop), started again after {down:.0f} s"


def scheduler_restart(d: Deployed, rnd: random.Random) -> str:
    d.airflow.kill("scheduler", "triggerer")
    down = rnd.uniform(10, 40)
    time.sleep(down)
    d.airflow.revive("scheduler", "triggerer")
    return f"Airflow's scheduler and triggerer killed, started again after {down:.0f} s"


@dataclass
class _OnePipeline:
    """What a pipeline fault of the single-host soak is given: one flow's pipeline."""

    pipeline: LivePipeline
    cluster: KafkaCluster


def _pipeline_fault(fault: pipeline_faults.Fault) -> HostFault:
    def act(d: Deployed, rnd: random.Random) -> str:
        flow = rnd.choice(sorted(d.pipelines))
        return f"{flow}: " + fault.act(_OnePipeline(d.pipelines[flow], d.cluster), rnd)

    return HostFault(fault.name, fault.what, act)


FAULTS = [
    HostFault("host_killed", "a worker host killed whole while it runs a Spark step",
              host_killed),
    HostFault("network_cut", "a worker host's network cut for a minute", network_cut),
    HostFault("s3_restart", "the S3 server restarted", s3_restart),
    HostFault("store_restart", "the store's PostgreSQL restarted", store_restart),
    HostFault("scheduler_restart", "the scheduler and the triggerer killed and restarted",
              scheduler_restart),
    *(_pipeline_fault(f) for f in pipeline_faults.FAULTS),
]
