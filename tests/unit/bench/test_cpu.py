"""bench.cpu: each process's CPU time between readings, summed by the part it belongs to."""

from __future__ import annotations

import pytest

from bench.cpu import Proc, part_of, spent

pytestmark = pytest.mark.unit


def test_processes_are_told_apart_by_their_command_lines() -> None:
    assert part_of("/v/bin/python -m harness.drill.apps /w/spec.json", 1, 2) == "pipelines"
    assert part_of("airflow supervisor: recon__f01 begin", 1, 2) == "airflow tasks"
    assert part_of("airflow worker -- LocalExecutor: <idle>", 1, 2) == "airflow tasks"
    assert part_of("/v/bin/python /v/bin/airflow scheduler", 1, 2) == "airflow scheduler"
    assert part_of("java -cp x org.apache.spark.sql.connect.service.SparkConnectServer", 1,
                   2) == "spark server"
    assert part_of("java -Xmx1g kafka.Kafka server.properties", 1, 2) == "kafka"
    assert part_of("postgres: checkpointer", 1, 2) == "postgresql"
    assert part_of("bash -c sleep 1", 1, 2) == "other"
    # the benchmark's own process writes the pipelines' upstream rows
    assert part_of("python -m bench.fleet", 7, 7) == "pipelines"


def test_only_what_a_process_spent_since_the_last_reading_counts() -> None:
    before = {1: Proc(10.0, "100", "a"), 2: Proc(5.0, "200", "b"), 3: Proc(1.0, "300", "c")}
    after = {1: Proc(12.5, "100", "a"),   # ran 2.5 s more
             2: Proc(5.0, "200", "b"),    # idle
             3: Proc(0.5, "900", "c2"),   # pid 3 reused by a new process: from its start
             4: Proc(0.25, "950", "d")}   # new
    assert spent(before, after) == {1: 2.5, 3: 0.5, 4: 0.25}
