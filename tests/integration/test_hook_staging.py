"""Where Airflow holds a SQL tier's connection, staging connects through the connection's own
provider hook: PostgresHook (psycopg, `sslmode=require` against a server that refuses TCP
without TLS) and MySqlHook (mysqlclient, against Debian's MariaDB). The hooks' extras reach the
driver, a `cursor` extra that returns dicts does not change what staging reads, and the session
is in UTC though both servers' default zone is UTC+8 (the window's rows straddle its edges, so
a session in the server's zone would count 2 of 3). Run as a user does beside the scheduler:
`kafka-recon check` with AIRFLOW_HOME set and the connections in Airflow's secrets."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from harness.services.kafka import KafkaCluster
from harness.services.mariadb import MariaDBServer
from harness.services.postgres import PostgresServer
from tests.integration.engine_harness import END, START, Scenario

pytestmark = pytest.mark.integration

KAFKA_RECON = Path(sys.executable).parent / "kafka-recon"
# in UTC: inside the window 3; a session at UTC+8 reads the window 8 hours early and finds 2
ROWS = {1: START + timedelta(minutes=30), 2: END - timedelta(hours=3),
        3: END - timedelta(minutes=30), 4: START - timedelta(hours=1)}
FLOW = """
flows:
  h:
    owners: [owner@example.com]
    bucket: 1h
    grace: 10m
    record: {{id: "$.id", event_time: "$.ts"}}
    tiers:
      - {{name: db, type: sql, conn: "{up}",
         ids: "SELECT id, ts AS event_time FROM tz_up WHERE ts >= :start AND ts < :end"}}
      - {{name: topic, type: kafka, bootstrap: "{bootstrap}", topic: "{topic}"}}
      - {{name: sink, type: sql, conn: "{sink}",
         ids: "SELECT id, ts AS event_time FROM tz_sink WHERE ts >= :start AND ts < :end"}}
"""


def _utc(i: int) -> str:
    return ROWS[i].strftime("%Y-%m-%d %H:%M:%S")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    password = f"pw-{uuid.uuid4().hex}"
    pg = PostgresServer(Path(tempfile.mkdtemp(prefix="kafka-recon-pghook-")), tls=True).start()
    maria = MariaDBServer(tmp_path_factory.mktemp("mariadb-hook"), password=password).start()
    try:
        up = make_url(pg.create_database("hook_up"))
        sink = make_url(maria.create_database("hook_sink"))
        # both servers' sessions start at UTC+8 unless told otherwise
        Scenario._sql(up.set(query={"sslmode": "require"}).render_as_string(False),
                      "ALTER DATABASE hook_up SET timezone = 'Asia/Shanghai'")
        Scenario._sql(up.set(query={"sslmode": "require"}).render_as_string(False),
                      "CREATE TABLE tz_up (id BIGINT, ts TIMESTAMPTZ)")
        Scenario._sql(up.set(query={"sslmode": "require"}).render_as_string(False),
                      "INSERT INTO tz_up VALUES " + ", ".join(
                          f"({i}, '{_utc(i)}+00')" for i in ROWS))
        maria.sql("SET GLOBAL time_zone = '+08:00'")
        maria.sql("CREATE TABLE tz_sink (id BIGINT, ts TIMESTAMP NULL); "
                  "SET time_zone = '+00:00'; INSERT INTO tz_sink VALUES " + ", ".join(
                      f"({i}, '{_utc(i)}')" for i in ROWS if i != 2), "hook_sink")
        yield (up.set(password=None), sink.set(password=password))
    finally:
        maria.stop()
        pg.stop()
        shutil.rmtree(pg.base_dir, ignore_errors=True)


def _conn(conn_type: str, u: Any, extra: dict[str, str]) -> str:
    return json.dumps({"conn_type": conn_type, "host": u.host, "port": u.port,
                       "schema": u.database, "login": u.username, "password": u.password,
                       "extra": extra})


def test_a_connection_airflow_holds_is_staged_through_its_providers_hook_in_utc(
        tmp_path: Path, kafka: KafkaCluster, servers: tuple[Any, Any]) -> None:
    up, sink = servers
    scn = Scenario(tmp_path, kafka.bootstrap)
    config = tmp_path / "hooks.yaml"
    config.write_text(FLOW.format(up="up_pg", sink="sink_maria", bootstrap=kafka.bootstrap,
                                  topic=scn.topic))
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow"),
           "KAFKA_RECON_OUT": str(tmp_path / "runs"),
           "AIRFLOW_CONN_UP_PG": _conn("postgres", up, {"sslmode": "require",
                                                        "cursor": "dictcursor"}),
           "AIRFLOW_CONN_SINK_MARIA": _conn("mysql", sink, {"cursor": "dictcursor",
                                                            "charset": "utf8mb4"})}
    done = subprocess.run([str(KAFKA_RECON), "check", "--config", str(config), "--start",
                           START.isoformat(), "--end", END.isoformat()], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert (f"db: postgresql at {up.host}:{up.port}/hook_up through PostgresHook: "
            "3 row(s) in the window (ids)") in out
    assert (f"sink: mysql at {sink.host}:{sink.port}/hook_sink through MySqlHook: "
            "2 row(s) in the window (ids)") in out

    # the hook is what connects: without TLS asked for, the server's refusal, named by tier
    env["AIRFLOW_CONN_UP_PG"] = _conn("postgres", up, {"sslmode": "disable"})
    refused = subprocess.run([str(KAFKA_RECON), "check", "--config", str(config), "--start",
                              START.isoformat(), "--end", END.isoformat()], env=env,
                             cwd=tmp_path, capture_output=True, text=True, timeout=300,
                             check=False)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    [line] = [x for x in refused.stdout.splitlines() if x.strip().startswith("error: db:")]
    assert f"(postgresql at {up.host}:{up.port}/hook_up through PostgresHook)" in line
    assert "no encryption" in line, line
