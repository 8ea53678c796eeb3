"""How fast the Reconciliation page's grid answers for a large fleet: 200 flows of 5-minute
windows, a day of history each (288 windows, 57,600 recorded runs, a finding in one window of
twenty), through the page's own route (FastAPI, Airflow's login stood in for), over SQLite and
over PostgreSQL.

    python -m bench.grid [--flows 200] [--windows 288] [--repeats 7] [--postgres]

Writes bench/grid.json: each store's seconds per page (median and every repeat), the page's
size, and the JSON route's seconds. The target: under a second on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("grid.json")
STEP = timedelta(minutes=5)


def flow_config(n: int) -> str:
    return "flows:\n" + "".join(f"""
  flow{i:03d}:
    owners: [team{i % 7}@example.com]
    window: 5m
    record: {{id: "$.id", event_time: "$.ts"}}
    tiers:
      - {{name: topic, type: kafka, bootstrap: "cluster{i % 3}:9092", topic: t{i}}}
      - {{name: sink, type: sql, conn: "sqlite:///x.db",
         ids: "SELECT id, ts AS event_time FROM t WHERE ts >= :start AND ts < :end"}}
""" for i in range(n))


def fill(url: str, flows: int, windows: int, now: datetime) -> None:
    """The history a fleet leaves: a run per flow and window, every twentieth with a loss."""
    from sqlalchemy import insert

    from kafka_recon.outputs import history

    eng = history.engine(url)
    end = now.replace(second=0, microsecond=0) - timedelta(minutes=now.minute % 5 + 20)
    runs, found = [], []
    for i in range(flows):
        for w in range(windows):
            start = end - STEP * (windows - w)
            bad = (i + w) % 20 == 0
            key = {"flow": f"flow{i:03d}", "window_start": start, "window_end": start + STEP}
            runs.append({**key, "status": "findings" if bad else "ok", "findings": int(bad),
                         "summary": f"flow{i:03d}: "
                                    + ("FINDINGS - 3 record(s) lost" if bad else "OK"),
                         "run_dir": f"/runs/flow{i:03d}/{w}", "report": None,
                         "data_docs": None, "recorded_at": start + STEP * 2})
            if bad:
                found.append({**key, "hop": "topic->sink", "kind": "loss",
                              "side": "consume", "records": 3, "allowed": 0, "failed": 1})
    with eng.begin() as con:
        for table in (history.findings_table, history.runs):
            con.execute(table.delete())
        con.execute(insert(history.runs), runs)
        con.execute(insert(history.findings_table), found)


def client(config: Path, url: str) -> Any:
    import airflow.api_fastapi.app as airflow_app
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from kafka_recon.airflow.plugins.ui import create_app

    class Everything:
        def filter_authorized_dag_ids(self, *, dag_ids: set[str], user: Any,
                                      method: str = "GET") -> set[str]:
            return set(dag_ids)

        def is_authorized_dag(self, **_: Any) -> bool:
            return True

    os.environ.update(KAFKA_RECON_CONFIG=str(config), KAFKA_RECON_STORE=url)
    airflow_app.get_auth_manager = lambda: Everything()  # type: ignore[assignment,return-value]
    app = create_app()
    app.dependency_overrides[get_user] = lambda: None
    return TestClient(app)


def measure(c: Any, path: str, repeats: int) -> dict[str, Any]:
    c.get(path)  # the first answer loads the config and opens the store
    times = []
    size = 0
    for _ in range(repeats):
        t = time.perf_counter()
        r = c.get(path)
        times.append(time.perf_counter() - t)
        assert r.status_code == 200, r.text[:500]
        size = len(r.content)
    return {"median_s": round(statistics.median(times), 3),
            "runs_s": [round(x, 3) for x in times], "bytes": size}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.grid", description=__doc__.splitlines()[0])
    p.add_argument("--flows", type=int, default=200)
    p.add_argument("--windows", type=int, default=288)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--postgres", action="store_true", help="also over a private PostgreSQL")
    a = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="kafka-recon-grid-"))
    config = work / "flows.yaml"
    config.write_text(flow_config(a.flows))
    now = datetime.now(UTC)
    stores = {"sqlite": f"sqlite:///{work / 'store.db'}"}
    pg = None
    if a.postgres:
        from harness.services.postgres import PostgresServer

        pg = PostgresServer(Path(tempfile.mkdtemp(prefix="kafka-recon-grid-pg-"))).start()
        stores["postgresql"] = pg.create_database("grid")
    out: dict[str, Any] = {"flows": a.flows, "windows": a.windows, "repeats": a.repeats,
                           "cells": a.flows * a.windows, "stores": {}}
    try:
        for name, url in stores.items():
            fill(url, a.flows, a.windows, now)
            c = client(config, url)
            out["stores"][name] = {"page": measure(c, "/?span=24h", a.repeats),
                                   "json": measure(c, "/api/grid?span=24h", a.repeats)}
            print(name, json.dumps(out["stores"][name]["page"]), flush=True)
    finally:
        if pg is not None:
            pg.stop()
    OUT.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
