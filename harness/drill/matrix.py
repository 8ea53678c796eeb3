"""The drill end to end: a three-broker cluster, Spark, the scenarios, the matrix.

`python -m harness.drill [--scenario S1 ...] [--repeat N]` and `make drill` land here. The matrix is
printed and written as `docs/drill.md` and `docs/drill.json` (or under `--docs`).
"""

from __future__ import annotations

import json
import platform
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kafka_recon.settings import REPO_ROOT

CONTROLS = ("S11", "S12")


def run_drill(scenarios: list[str] | None, out: Path, repeat: int = 5,
              attempts: int = 3, docs: Path | None = None,
              secured: bool = False) -> list[dict[str, Any]]:
    """`secured`: the cluster has SASL_SSL, mTLS and an authorizer denying by default, and
    kafka-recon reads it over SASL_SSL (SCRAM-SHA-512) through an Airflow Kafka connection,
    as a principal holding only the least-privilege ACLs of docs/cluster.md. The apps under
    test keep the platform's internal PLAINTEXT listener: their faults do not depend on it."""
    import os

    from harness.drill.connect import CONNECT_SCENARIOS
    from harness.drill.connect import attempt as connect_attempt
    from harness.drill.repair import Desk
    from harness.drill.runner import CLUSTER_CONFIG, DRILL_CONN, pick, run_scenario
    from harness.drill.scenarios import SCENARIOS
    from harness.services.kafka import KafkaCluster
    from harness.services.kafka_security import Security
    from kafka_recon.config import DELTA_SPARK
    from kafka_recon.settings import spark_jars
    from kafka_recon.spark.session import session

    chosen = pick({**SCENARIOS, **CONNECT_SCENARIOS}, scenarios)  # type: ignore[dict-item]
    out = out.resolve()  # apps and the Flume agent run in folders of their own
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    cluster = KafkaCluster(out / "cluster", size=3, broker_config=CLUSTER_CONFIG,
                           security=Security(out / "certs") if secured else None)
    cluster.start()
    # the aggregate cluster of the replication scenarios: one broker, plain, MirrorMaker 2's
    # target (started only when one of them runs)
    target = KafkaCluster(out / "cluster-b", size=1).start() \
        if any(sc.mirror for sc in chosen) else None
    if cluster.security is not None:
        os.environ[f"AIRFLOW_CONN_{DRILL_CONN.upper()}"] = json.dumps(
            {"conn_type": "kafka", "extra": cluster.security.sasl(cluster.sasl_bootstrap)})
    # a streaming writer's scenario reads its table: Iceberg's and Delta's jars and Delta's
    # session settings, as a flow with a table tier gets them
    lake = any(sc.sink_format for sc in chosen)
    spark = session("kafka-recon drill", master="local[2]", jars=spark_jars(lake=lake),
                    given=dict(DELTA_SPARK) if lake else None)
    spark.sparkContext.setLogLevel("ERROR")
    # Airflow for the scenarios repaired once judged (started on the first one)
    desk = Desk(out) if any(sc.repair for sc in chosen) else None
    # the connector scenarios' PostgreSQL (wal_level=logical), each attempt a database of it
    pg = None
    if any(sc.id in CONNECT_SCENARIOS for sc in chosen):
        import tempfile

        from harness.services.postgres import PostgresServer

        # outside `out`: the server runs as the postgres user, who may not enter it
        pg = PostgresServer(Path(tempfile.mkdtemp(prefix="kafka-recon-drill-pg-")),
                            logical=True).start()
    rows: list[dict[str, Any]] = []
    began = time.monotonic()
    try:
        for sc in chosen:
            times = repeat if sc.id in CONTROLS else 1
            for k in range(1, times + 1):
                label = sc.id if times == 1 else f"{sc.id}#{k}"
                at = (lambda folder, sc=sc: connect_attempt(sc, cluster, pg, spark, folder)) \
                    if sc.id in CONNECT_SCENARIOS else None
                row = run_scenario(sc, cluster, spark, out, attempts=attempts, label=label,
                                   target=target, desk=desk, attempt_in=at)
                rows.append(row)
                print(line(row), flush=True)
    finally:
        if pg is not None:
            pg.stop()
        if desk is not None:
            desk.stop()
        spark.stop()
        cluster.stop()
        if target is not None:
            target.stop()
    elapsed = time.monotonic() - began
    if docs is not None:
        write_docs(rows, docs, elapsed, "drill-secured" if secured else "drill")
    print(markdown_table(rows))
    return rows


def line(row: dict[str, Any]) -> str:
    return f"{row['scenario']:<6} {row['result'].upper():<18} expected: {row['expected']} " \
           f"(cause {row['cause']}) | found: {row['found']} (cause {row['found_cause']})"


def markdown_table(rows: list[dict[str, Any]]) -> str:
    head = "| scenario | seeds | what happens | expected | true cause | found | cause found | " \
           "attempts | result |\n|---|---|---|---|---|---|---|---|---|\n"
    body = "".join(
        f"| {r['scenario']} | {r['seeds']} | {r['title']} | {r['expected']} | {r['cause']} | "
        f"{r['found']} | {r['found_cause']} | {len(r['attempts'])} | **{r['result']}** |\n"
        for r in rows)
    return head + body


def write_docs(rows: list[dict[str, Any]], folder: Path, elapsed: float,
               name: str = "drill") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"ran_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "seconds": round(elapsed), "machine": f"{platform.machine()}, "
            f"{platform.python_implementation()} {platform.python_version()}",
            "passed": sum(r["result"] == "pass" for r in rows), "rows": len(rows)}
    (folder / f"{name}.json").write_text(json.dumps({**meta, "matrix": rows}, indent=2,
                                                  default=str))
    evidence = []
    for r in rows:
        for a in r["attempts"]:
            evidence.append(f"### {r['scenario']}, attempt {a['n']}: {a['outcome']}\n")
            if a.get("why"):
                evidence.append(f"- {a['why']}\n")
            for e in a.get("evidence", []):
                evidence.append(f"- {e}\n")
            for f in a.get("flows", []):
                evidence.append(f"- flow `{f['flow']}`: status {f['status']}; truth "
                                f"{f['truth'] or '{}'}; found {f['found'] or '{}'}\n")
                for c in f.get("cause_evidence", []):
                    evidence.append(f"- cause: {c}\n")
                if f["audit"]:
                    evidence.append(f"- audit also said: {', '.join(f['audit'])}\n")
            for n in (a.get("repair") or {}).get("notes", []):
                evidence.append(f"- repair: {n}\n")
            for p in a.get("problems", []):
                evidence.append(f"- mismatch: {p}\n")
            evidence.append("\n")
    secured = ("kafka-recon read the cluster over SASL_SSL (SCRAM-SHA-512) as a principal "
               "holding only the least-privilege ACLs of docs/cluster.md, the broker denying "
               "anything else. ") if name.endswith("secured") else ""
    (folder / f"{name}.md").write_text(
        "# Loss drill" + (" on a secured cluster" if secured else "") + "\n\n"
        "Generated by `make drill` (`python -m harness.drill`); do not edit by hand. Each "
        "scenario of "
        "the design's catalogue ran for real on a three-broker KRaft cluster on loopback with "
        "the drill's producer and consumer apps; the reconciliation's findings were compared "
        "with the truth from the apps' ledgers and a plain read of the topic and the sinks "
        "(kind, side, hop, count and the id set), and each finding's cause code with the "
        "scenario's true cause. \"fault did not bite\" is never a pass. "
        + (CONNECTORS if any(r["scenario"].startswith("C") for r in rows) else "")
        + secured + (REPAIRED if any(a.get("repair") for r in rows for a in r["attempts"])
                     else "") + "\n\n"
        f"Ran {meta['ran_at']} in {meta['seconds']} s; {meta['passed']} of {meta['rows']} rows "
        "passed.\n\n" + markdown_table(rows) + "\n## Evidence\n\n" + "".join(evidence))


CONNECTORS = (
    "The connector scenarios (C1-C5, and Q1, a quiet upstream) run a pipeline of Kafka "
    "Connect's own workers instead "
    "of the apps (harness/drill/connect.py, docs/connect.md): Debezium's PostgreSQL source on "
    "one Connect cluster, the harness's SQL sink on another, PostgreSQL with logical "
    "replication; their truth is read from PostgreSQL and, record by record, from the topic "
    "and the dead-letter queue. ")


REPAIRED = (
    "A row whose expectation ends \"then repaired\" was then repaired as its owner would "
    "(harness/drill/repair.py): `recon_repair` triggered and its plan approved through "
    "Airflow's REST API, the delivery SIGKILLed at its first write to the repair topic, "
    "triggered and approved again, the sink's loader (one more consumer app, read_committed, "
    "committing after its writes) reading the repair topic, and the DAG's own re-run of the "
    "window; it passes when that re-run is ok, the sink holds each lost id exactly once and a "
    "third trigger has nothing left to plan. ")


def default_docs() -> Path:
    return REPO_ROOT / "docs"
