"""Flows that land in lakehouse tables: MariaDB -> topic -> an Iceberg table (a Hadoop catalog,
partitioned by day), and -> a Delta table, each run by `kafka-recon run` (its own Spark, with
Iceberg's and Delta's jars added for the flow), exact to the id against a known loss, naming
the snapshot or version it read; a re-run pinned to the older state (`as_of`) reads that
state, and a table that does not exist ends the run inconclusive naming it.

The upstream's connection is held in Airflow's metadata database (the command line, beside
a deployed Airflow, resolves it there)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from harness import lake
from harness.services.airflow import airflow_env, airflow_many
from harness.services.kafka import KafkaCluster
from harness.services.mariadb import MariaDBServer
from harness.services.ports import free_port
from tests.integration.engine_harness import END, START, Scenario, text
from tests.report_lines import meaningless

pytestmark = pytest.mark.integration

CLI = str(Path(sys.executable).parent / "kafka-recon")
N = 40
LOST = {23, 29, 33}
# the first commit holds ids up to here; the second the rest but LOST
FIRST = 20

FLOWS = """
flows:
  {name}:
    owners: [lake-team@example.com]
    bucket: 1h
    grace: 10m
    replays: 2
    record: {{id: "$.id", event_time: "$.ts"}}
    tiers:
      - name: orders_db
        type: sql
        conn: orders_maria
        ids: "SELECT id, ts AS event_time FROM src WHERE ts >= :start AND ts < :end"
      - name: orders_topic
        type: kafka
        bootstrap: "{bootstrap}"
        topic: "{topic}"
      - {table}
"""


@dataclass
class Lake:
    work: Path
    scn: Scenario
    env: dict[str, str]
    warehouse: Path
    delta: Path

    def config(self, name: str, table: dict[str, Any]) -> Path:
        path = self.work / f"{name}.yaml"
        path.write_text(FLOWS.format(name=name, bootstrap=self.scn.bootstrap,
                                     topic=self.scn.topic, table=json.dumps(table)))
        return path

    def run(self, name: str, table: dict[str, Any]) -> tuple[int, dict[str, Any], Path]:
        out = self.work / "runs" / name
        done = subprocess.run(
            [CLI, "run", "--config", str(self.config(name, table)), "--flow", name,
             "--start", START.isoformat(), "--end", END.isoformat(), "--out", str(out)],
            capture_output=True, text=True, timeout=600, check=False, env=self.env)
        assert (out / "result.json").exists(), done.stderr[-3000:]
        return done.returncode, json.loads((out / "result.json").read_text()), out


@pytest.fixture(scope="module")
def lakes(kafka: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    work = tmp_path_factory.mktemp("lake")
    maria = MariaDBServer(work / "mariadb").start()
    try:
        up = maria.create_database("lake_up")
        scn = Scenario(work, kafka.bootstrap, up_url=up)
        rows = {i: START + timedelta(minutes=30 * i) for i in range(1, N + 1)}
        scn.upstream(rows)
        scn.produce(list(rows.items()))
        # the streaming job's two commits: the second never wrote LOST
        batches = [[[i, text(t)] for i, t in rows.items() if i <= FIRST],
                   [[i, text(t)] for i, t in rows.items() if i > FIRST and i not in LOST]]
        warehouse, delta = work / "warehouse", work / "delta"
        lake.write({"iceberg": {"warehouse": str(warehouse), "table": "lake.db.orders",
                                "batches": batches},
                    "delta": {"path": str(delta), "batches": batches}}, work)
        u = make_url(up)
        env = airflow_env(work / "airflow", smtp_port=free_port(), extra={
            "KAFKA_RECON_STORE": f"sqlite:///{work / 'store.db'}"})
        conns = work / "conns.json"
        conns.write_text(json.dumps({"orders_maria": {
            "conn_type": "mysql", "host": u.host, "port": u.port, "schema": u.database,
            "login": u.username, "password": u.password,
            "extra": json.dumps({"charset": "utf8mb4"})}}))
        done = airflow_many([["db", "migrate"], ["connections", "import", str(conns)]], env,
                            work / "setup.log")
        assert done.returncode == 0, work / "setup.log"
        conns.unlink()
        yield Lake(work, scn, env, warehouse, delta)
    finally:
        maria.stop()


def _lost(result: dict[str, Any], out: Path) -> tuple[str, str, set[int]]:
    [loss] = [f for f in result["findings"] if f["kind"] == "loss"]
    with (out / loss["ids"]).open(newline="", encoding="utf-8") as fh:
        return loss["side"], loss["hop"], {int(r["id"]) for r in csv.DictReader(fh)}


ICEBERG = {"name": "lake", "type": "table", "format": "iceberg", "table": "lake.db.orders",
           "catalog": {"type": "hadoop"}}
DELTA = {"name": "lake", "type": "table", "format": "delta"}


def test_an_iceberg_sink_is_exact_to_the_id_and_names_the_snapshot_it_read(lakes: Lake) -> None:
    table = {**ICEBERG, "catalog": {"type": "hadoop", "warehouse": str(lakes.warehouse)}}
    code, result, out = lakes.run("ice", table)
    assert code == 1 and result["status"] == "findings", result["reasons"]
    assert [(t["name"], t["count"]) for t in result["tiers"]] == [
        ("orders_db", N), ("orders_topic", N), ("lake", N - len(LOST))]
    assert _lost(result, out) == ("consume", "orders_topic->lake", LOST)
    sink = result["tiers"][2]
    assert sink["where"] == "iceberg table lake.db.orders" and sink["as_of"] > 0
    assert f"read as of snapshot {sink['as_of']}" in (out / "report.txt").read_text()
    assert meaningless(out) == [], "only the table tier says what it was read as of"

    # the table's first snapshot, pinned: it held the first commit only
    first = _snapshots(lakes.warehouse)[0]
    code, again, out = lakes.run("ice_then", {**table, "as_of": first})
    assert again["tiers"][2]["as_of"] == first and again["tiers"][2]["count"] == FIRST
    side, hop, ids = _lost(again, out)
    assert ids == set(range(FIRST + 1, N + 1)), "what the second commit added is lost then"


def _snapshots(warehouse: Path) -> list[int]:
    """The Iceberg table's snapshot ids, oldest first, from its newest metadata file."""
    meta = sorted((warehouse / "db" / "orders" / "metadata").glob("v*.metadata.json"),
                  key=lambda p: int(p.name[1:].split(".")[0]))[-1]
    snaps = json.loads(meta.read_text())["snapshots"]
    return [s["snapshot-id"] for s in sorted(snaps, key=lambda s: s["timestamp-ms"])]


def test_a_delta_sink_is_exact_to_the_id_and_names_the_version_it_read(lakes: Lake) -> None:
    code, result, out = lakes.run("delta", {**DELTA, "table": str(lakes.delta)})
    assert code == 1 and result["status"] == "findings", result["reasons"]
    assert result["tiers"][2]["count"] == N - len(LOST) and result["tiers"][2]["as_of"] == 1
    assert _lost(result, out) == ("consume", "orders_topic->lake", LOST)


@pytest.mark.parametrize(("name", "table", "says"), [
    ("gone", {**DELTA, "table": "{work}/no-such-table"},
     "tier 'lake' (delta table {work}/no-such-table)"),
    # an Iceberg catalog whose database does not answer (nothing listens on port 1)
    ("nocatalog", {**ICEBERG, "catalog": {"type": "jdbc", "uri": "jdbc:postgresql://127.0.0.1:1/x",
                                          "warehouse": "{work}/wh-jdbc"}},
     "tier 'lake' (iceberg table lake.db.orders): org.apache.iceberg.jdbc"),
])
def test_a_table_or_catalog_that_cannot_be_read_ends_the_run_inconclusive_naming_it(
        lakes: Lake, name: str, table: dict[str, Any], says: str) -> None:
    table = json.loads(json.dumps(table).replace("{work}", str(lakes.work)))
    code, result, _ = lakes.run(name, table)
    assert code == 2 and result["status"] == "inconclusive"
    [reason] = result["reasons"]
    assert says.replace("{work}", str(lakes.work)) in reason and "\n" not in reason, reason
