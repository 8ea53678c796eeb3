"""`python -m bench.secured`: the same run over PLAINTEXT, SASL_SSL (SCRAM-SHA-512) and mTLS.

One secured broker, one topic of N records (bench.run's data), and `kafka-recon run` pointed at
each listener in turn, the runs interleaved (P, S, M, P, S, M, ...) so the shared machine's noise
falls on all three alike. Each listener's run must give the same answer (the same missing ids
at every hop); medians and the ratios to PLAINTEXT go to bench/results-secured.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.run import FLOW, REPLAYS, TOPIC, fill, measured, summary
from harness.services.kafka import KafkaCluster
from harness.services.kafka_security import Security, grant, reader_acls
from kafka_recon.settings import REPO_ROOT

VENV_BIN = Path(sys.executable).parent


def answer(run: Path) -> dict[str, list[str]]:
    """Every id file of a run, by name: what must not depend on the listener."""
    return {str(p.relative_to(run)): sorted(p.read_text().splitlines())
            for p in sorted(run.rglob("*.csv")) if "replays" not in p.parts}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.secured", description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=300_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--work", type=Path, default=REPO_ROOT / "bench-out" / "secured")
    p.add_argument("--out", type=Path, default=REPO_ROOT / "bench" / "results-secured.json")
    a = p.parse_args(argv)
    shutil.rmtree(a.work, ignore_errors=True)
    a.work.mkdir(parents=True)
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start, end = today - timedelta(days=1), today
    kafka = KafkaCluster(a.work / "kafka", heap="1g", security=Security(a.work / "certs"),
                         lean=False).start()
    assert kafka.security is not None
    try:
        facts = fill(a.work, kafka.bootstrap, a.records, start)
        grant(kafka.bootstrap, "recon", reader_acls(TOPIC, []))
        grant(kafka.bootstrap, "recon-tls", reader_acls(TOPIC, []))
        conns = {"sasl_ssl": kafka.security.sasl(kafka.sasl_bootstrap),
                 "mtls": kafka.security.mtls(kafka.ssl_bootstrap)}
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(REPO_ROOT)}
        for name, conf in conns.items():
            env[f"AIRFLOW_CONN_BENCH_{name.upper()}"] = json.dumps({"conn_type": "kafka",
                                                                   "extra": conf})
        flow = FLOW.format(work=a.work, bootstrap=kafka.bootstrap, topic=TOPIC,
                           replays=REPLAYS)
        configs = {"plaintext": flow}
        for name in conns:
            configs[name] = flow.replace(f'bootstrap: "{kafka.bootstrap}"',
                                         f'conn: "bench_{name}"')
        for name, text in configs.items():
            (a.work / f"{name}.yaml").write_text(text)
        seconds: dict[str, list[float]] = {n: [] for n in configs}
        answers: dict[str, Any] = {}
        for r in range(a.repeats):
            for name in configs:
                out = a.work / f"run-{name}-{r}"
                m = measured([str(VENV_BIN / "kafka-recon"), "run", "--config",
                              str(a.work / f"{name}.yaml"), "--flow", "bench", "--start",
                              start.isoformat(), "--end", end.isoformat(), "--out", str(out),
                              "--master", a.master], env=env)
                seconds[name].append(m["seconds"])
                answers[name] = answer(out)
                print(f"{name} run {r + 1}: {m['seconds']:.1f}s", flush=True)
        same = all(answers[n] == answers["plaintext"] for n in answers)
        base = statistics.median(seconds["plaintext"])
        result = {
            "records": a.records, "data": facts, "same_answer": same,
            "seconds": {n: summary(v) for n, v in seconds.items()},
            "ratio_to_plaintext": {n: round(statistics.median(v) / base, 3)
                                   for n, v in seconds.items()},
            "machine": {"cores": os.cpu_count(), "master": a.master,
                        "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")},
        }
        a.out.write_text(json.dumps(result, indent=2))
        print(json.dumps({k: result[k] for k in ("same_answer", "ratio_to_plaintext")}))
        return 0 if same else 1
    finally:
        kafka.stop()


if __name__ == "__main__":
    raise SystemExit(main())
