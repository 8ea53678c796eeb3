"""Nothing kafka-recon writes depends on the host's time zone: the same flow and window run
from the command line on a host on UTC, on Shanghai time and on New York time (the window
spans New York's change from daylight saving time, when 01:00-02:00 comes twice) write the same
result.json, report, mail, history and metrics, with every bucket labelled in UTC.

The flow has every kind of tier whose records Spark reads: a SQLite upstream, the topic, a
PostgreSQL sink (a TIMESTAMP column) and a Parquet table after it. The Python process, Spark's
workers and the databases' clients all run under the zone; the JVMs are on UTC, as kafka-recon
starts them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from harness.services.kafka import KafkaCluster
from tests.integration.engine_harness import Scenario, findings

pytestmark = pytest.mark.integration

CLI = str(Path(sys.executable).parent / "kafka-recon")
ZONES = ("UTC", "Asia/Shanghai", "America/New_York")
# New York's clocks go back at 06:00Z on 2026-11-01: 05:00Z and 06:00Z are both 01:00 there
START = datetime(2026, 11, 1, tzinfo=UTC)
END = START + timedelta(days=1)
N = 144  # one record every 10 minutes
WRITE_LOST = {33, 37, 40}     # 05:30Z, 06:10Z, 06:40Z: New York's hour that comes twice
CONSUME_LOST = {140, 143}     # 23:20Z, 23:50Z: the last bucket, the next day in Shanghai
LAKE_LOST = {2}               # 00:20Z: the day before in New York

# what each zone's run hands back besides result.json: its history rows, metrics and mail
AFTER = """
import json, sys
from kafka_recon import orchestrate
from kafka_recon.outputs import history, metrics
from kafka_recon.outputs.notify import build_message

run = orchestrate.load("f", sys.argv[1], sys.argv[2], None, sys.argv[3])
orchestrate.validate(run)
orchestrate.report(run)
orchestrate.record_history(run)
eng = history.engine()
with eng.connect() as con:
    rows = {t.name: sorted([str(v) for v in r] for r in con.execute(t.select()))
            for t in (history.tier_buckets, history.hop_buckets)}
lines = [l for l in metrics.exposition(eng).decode().splitlines()
         if l.startswith("kafka_recon_window_end_timestamp_seconds")]
mail = build_message(orchestrate.conclude(run), run.folder, ["o@example.com"], "r@example.com")
print(json.dumps({"history": rows, "metrics": lines, "subject": mail["Subject"],
                  "mail": mail.get_body(("plain",)).get_content()}))
"""


def at(i: int) -> datetime:
    return START + timedelta(minutes=10 * i)


def _flow(scn: Scenario, lake: Path) -> None:
    scn.config.write_text(scn.config.read_text() + f"""
      - name: lake
        type: table
        format: parquet
        table: "{lake}"
""")


def _lake(path: Path, ids: list[int]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.mkdir(parents=True)
    pq.write_table(pa.table({"id": [str(i) for i in ids],
                             "event_time": pa.array([at(i) for i in ids],
                                                    pa.timestamp("us", tz="UTC"))}),
                   path / "part-0.parquet")


def _keep_forever(scn: Scenario) -> None:
    """The topic keeps records of a month ago (the broker's retention would delete them)."""
    admin = AdminClient({"bootstrap.servers": scn.bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, scn.topic, incremental_configs=[
        ConfigEntry("retention.ms", "-1", incremental_operation=AlterConfigOpType.SET)])
    for fut in admin.incremental_alter_configs([res]).values():
        fut.result(30)


def _run(scn: Scenario, zone: str, tmp: Path) -> dict[str, Any]:
    out = tmp / f"run-{zone.replace('/', '_')}"
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    env.update(TZ=zone, KAFKA_RECON_STORE=f"sqlite:///{out}.db")
    window = [START.isoformat(), END.isoformat()]
    proc = subprocess.run([CLI, "run", "--config", str(scn.config), "--flow", "f", "--start",
                           window[0], "--end", window[1], "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=900, check=False)
    assert proc.returncode == 1, (zone, proc.stdout, proc.stderr[-3000:])
    after = subprocess.run([sys.executable, "-c", AFTER, *window, str(out)],
                           capture_output=True, text=True, env={**env, "KAFKA_RECON_CONFIG":
                                                                str(scn.config)},
                           timeout=300, check=False)
    assert after.returncode == 0, (zone, after.stderr[-3000:])
    said = json.loads(after.stdout)
    # each zone's run folder is its own: the report and mail name it (its Data Docs)
    return {"out": out, "result": json.loads((out / "result.json").read_text()),
            "report": (out / "report.txt").read_text().replace(str(out), "<run>"),
            **said, "mail": said["mail"].replace(str(out), "<run>")}


def _of_the_run_itself(result: dict[str, Any]) -> dict[str, Any]:
    """result.json less what names this run rather than the window: the run itself, and its
    fresh consumer groups."""
    return {**result, "run": None,
            "replays": [{**r, "group": None} for r in result["replays"]]}


def test_the_same_window_on_hosts_of_three_zones_writes_the_same_utc_answer(
        kafka: KafkaCluster, postgres: Any, tmp_path: Path) -> None:
    scn = Scenario(tmp_path, kafka.bootstrap, partitions=2, origin=START,
                   down_url=postgres.create_database("zones_sink"))
    _keep_forever(scn)
    rows = {i: at(i) for i in range(N)}
    scn.upstream(rows)
    in_topic = [(i, t) for i, t in rows.items() if i not in WRITE_LOST]
    scn.produce(in_topic)
    in_sink = [(i, t) for i, t in in_topic if i not in CONSUME_LOST]
    scn.sink(in_sink)
    _lake(tmp_path / "lake", [i for i, _ in in_sink if i not in LAKE_LOST])
    _flow(scn, tmp_path / "lake")

    runs = {zone: _run(scn, zone, tmp_path) for zone in ZONES}

    utc = runs["UTC"]["result"]
    assert findings(utc) == [("loss", "consume", "sink->lake", 1),
                             ("loss", "consume", "topic->sink", 2),
                             ("loss", "write", "db->topic", 3)]
    buckets = {f["hop"]: f["buckets"] for f in utc["findings"] if f["kind"] == "loss"}
    assert buckets == {"db->topic": ["2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z"],
                       "topic->sink": ["2026-11-01T23:00:00Z"],
                       "sink->lake": ["2026-11-01T00:00:00Z"]}
    for tier in utc["tiers"]:
        assert sorted(tier["buckets"])[0] == "2026-11-01T00:00:00Z", tier["name"]
        assert sorted(tier["buckets"])[-1] == "2026-11-01T23:00:00Z", tier["name"]
    assert "3 records lost on the write side between db and topic, 05:00-06:00, 06:00-07:00" \
        in runs["UTC"]["report"]
    [end_metric] = runs["UTC"]["metrics"]
    assert float(end_metric.split()[-1]) == END.timestamp()

    for zone in ZONES[1:]:
        got = runs[zone]
        assert _of_the_run_itself(got["result"]) == _of_the_run_itself(utc), zone
        assert got["report"] == runs["UTC"]["report"], zone
        assert got["history"] == runs["UTC"]["history"], zone
        assert got["metrics"] == runs["UTC"]["metrics"], zone
        assert (got["subject"], got["mail"]) == (runs["UTC"]["subject"], runs["UTC"]["mail"])
    # byte for byte, once the run itself and its own consumer groups are set aside
    texts = {zone: re.sub(r'"(group|run)": "[^"]*"', r'"\1": ""',
                          (r["out"] / "result.json").read_text()) for zone, r in runs.items()}
    assert len(set(texts.values())) == 1
