"""Choose the bulk-read settings by measurement: the same `kafka-recon run` under variants.

    python -m bench.tune [--records 1000000] [--repeats 3] [--variants base,fetch8m,...]

On bench.run's data (one broker, upstream and sink tables), each variant runs the whole command
in a fresh process with one setting changed; variants are interleaved so the machine's drift
falls on all alike. Prints, and writes to bench/tune.json, the median seconds per variant and
the per-step laps of each run (timings.json). Every variant must name the same ids.
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

from bench.run import FLOW, ID_FILES, REPLAYS, TOPIC, fill, measured
from harness.services.kafka import KafkaCluster
from kafka_recon.settings import DEFAULT_JVM_OPTIONS, REPO_ROOT, SMALL_WINDOW_JVM_OPTIONS

# what each variant changes: module constants (set before the run), and Spark settings
MB = 1024 * 1024
VARIANTS: dict[str, dict[str, Any]] = {
    "base": {},
    "fetch8m": {"consts": {"kafka_recon.spark.replay.BULK_READ": {
        "kafka.max.partition.fetch.bytes": str(8 * MB), "kafka.fetch.max.bytes": str(64 * MB)}}},
    "fetch32m": {"consts": {"kafka_recon.spark.replay.BULK_READ": {
        "kafka.max.partition.fetch.bytes": str(32 * MB),
        "kafka.fetch.max.bytes": str(128 * MB), "kafka.receive.buffer.bytes": str(4 * MB)}}},
    # a poll hands the task up to this many of the records fetched (the consumer's default: 500)
    "poll100k": {"consts": {"kafka_recon.spark.replay.BULK_READ": {
        "kafka.max.partition.fetch.bytes": str(8 * MB), "kafka.fetch.max.bytes": str(64 * MB),
        "kafka.max.poll.records": "100000"}}},
    "slices1": {"consts": {"kafka_recon.spark.read.JDBC_SLICES": 1}},
    "slices4": {"consts": {"kafka_recon.spark.read.JDBC_SLICES": 4}},
    "slices2": {"consts": {"kafka_recon.spark.read.JDBC_SLICES": 2}},
    "slices8": {"consts": {"kafka_recon.spark.read.JDBC_SLICES": 8}},
    "no_aqe": {"spark": {"spark.sql.adaptive.enabled": "false"}},
    # the JVM's compiler and collector (local mode: the driver runs every task); "base" has
    # kafka-recon's own (kafka_recon.settings.DEFAULT_JVM_OPTIONS), "" the JVM's defaults
    "g1_default_jit": {"env": {"KAFKA_RECON_JVM_OPTIONS": ""}},
    "c1": {"env": {"KAFKA_RECON_JVM_OPTIONS": "-XX:TieredStopAtLevel=1"}},
    # both tiers (kafka-recon's options above SMALL_JIT_WINDOW) or the first only (up to it),
    # whatever the window's size
    "c2_x3": {"env": {"KAFKA_RECON_JVM_OPTIONS": DEFAULT_JVM_OPTIONS}},
    "c1_parallel": {"env": {"KAFKA_RECON_JVM_OPTIONS": SMALL_WINDOW_JVM_OPTIONS}},
    # when the JIT compiles: x10 waits ten times longer than the JVM's default thresholds
    "jit_x10": {"env": {"KAFKA_RECON_JVM_OPTIONS":
                        "-XX:+UseParallelGC -XX:CompileThresholdScaling=10"}},
    "jit_x3": {"env": {"KAFKA_RECON_JVM_OPTIONS":
                       "-XX:+UseParallelGC -XX:CompileThresholdScaling=3"}},
    "jit_x4": {"env": {"KAFKA_RECON_JVM_OPTIONS":
                       "-XX:+UseParallelGC -XX:CompileThresholdScaling=4"}},
    "jit_x1": {"env": {"KAFKA_RECON_JVM_OPTIONS": "-XX:+UseParallelGC"}},
    "heap2g": {"spark": {"spark.driver.memory": "2g"}},
    # on one machine a shuffle block and a cached column are written and read on the spot:
    # compressing them only spends CPU (local mode; a cluster's network is another matter)
    "no_compress": {"spark": {"spark.shuffle.compress": "false",
                              "spark.shuffle.spill.compress": "false",
                              "spark.sql.inMemoryColumnarStorage.compressed": "false"}},
    "cache_plain": {"spark": {"spark.sql.inMemoryColumnarStorage.compressed": "false"}},
    # the tiers' records cached compressed, as every cache was before 2026-11-29 (since, the
    # records' caches are plain and the comparison's compressed: kafka_recon.spark.session)
    "records_compressed": {"consts": {"kafka_recon.spark.session.RECORDS_COMPRESSED": True}},
    "partitions4": {"spark": {"spark.sql.shuffle.partitions": "4"}},
    # both of the two above: each alone was within the noise (bench/tune-compress.json)
    "lean_shuffle": {"spark": {"spark.shuffle.compress": "false",
                               "spark.shuffle.spill.compress": "false",
                               "spark.sql.inMemoryColumnarStorage.compressed": "false",
                               "spark.sql.shuffle.partitions": "4"}},
    # "base" maps the class archive `make setup` made (kafka_recon.spark.classes), when it did
    "no_class_archive": {"env": {"KAFKA_RECON_CLASS_ARCHIVE": ""}},
    # the first replay counts its distinct ids itself, a grouping of the window by id of its
    # own, as before 2026-11-27 (since, the reconcile's one comparison counts them)
    # a profile, not a setting: Spark's event log of each run (its jobs' and stages' times)
    "eventlog": {"spark": {"spark.eventLog.enabled": "true",
                           "spark.eventLog.dir": "file:///tmp/kafka-recon-eventlog"}},
    "replay_distinct": {"consts": {"kafka_recon.orchestrate.REPLAY_COUNTS_DISTINCT": True}},
}

RUNNER = """
import importlib, json, sys
consts = json.loads(sys.argv[1])
for path, value in consts.items():
    module, name = path.rsplit(".", 1)
    setattr(importlib.import_module(module), name, value)
from kafka_recon.faces.cli import main
sys.exit(main(sys.argv[2:]))
"""


def variant(name: str) -> dict[str, Any]:
    """A variant by name; `a+b` is both a's and b's changes (b's win where they overlap)."""
    out: dict[str, dict[str, Any]] = {}
    for part in name.split("+"):
        if part not in VARIANTS:
            raise SystemExit(f"bench.tune: no variant '{part}' (known: {', '.join(VARIANTS)})")
        for kind, changes in VARIANTS[part].items():
            out.setdefault(kind, {}).update(changes)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.tune", description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help="comma-separated; a+b combines two (e.g. base+eventlog)")
    p.add_argument("--work", type=Path, default=REPO_ROOT / "bench-out" / "tune")
    p.add_argument("--out", type=Path, default=REPO_ROOT / "bench" / "tune.json")
    a = p.parse_args(argv)
    names = a.variants.split(",")
    chosen = {n: variant(n) for n in names}
    shutil.rmtree(a.work, ignore_errors=True)
    a.work.mkdir(parents=True)
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start, end = today - timedelta(days=1), today
    kafka = KafkaCluster(a.work / "kafka", size=1, heap="1g", lean=False).start()
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    try:
        facts = fill(a.work, kafka.bootstrap, a.records, start)
        (a.work / "flows.yaml").write_text(FLOW.format(work=a.work, bootstrap=kafka.bootstrap,
                                                       topic=TOPIC, replays=REPLAYS))
        for r in range(a.repeats):
            for name in names:
                v = chosen[name]
                out = a.work / f"{name}-{r}"
                spark_args = " ".join(f"--conf {k}={val}" for k, val in
                                      v.get("spark", {}).items())
                env = {**os.environ, **v.get("env", {}), "PYSPARK_PYTHON": sys.executable,
                       "PYTHONPATH": str(REPO_ROOT),
                       "PYSPARK_SUBMIT_ARGS": f"{spark_args} pyspark-shell".strip()}
                m = measured([sys.executable, "-c", RUNNER, json.dumps(v.get("consts", {})),
                              "run", "--config", str(a.work / "flows.yaml"), "--flow",
                              "bench", "--start", start.isoformat(), "--end", end.isoformat(),
                              "--master", a.master, "--out", str(out)], env=env, ok=(0, 1))
                m["timings"] = json.loads((out / "timings.json").read_text())
                runs[name].append(m)
                print(f"{name} run {r + 1}: {m['seconds']:.1f}s, {m['cpu_seconds']} CPU s, "
                      f"{m['timings']}", flush=True)
    finally:
        kafka.stop()

    def ids(folder: Path) -> list[str]:
        return [(folder / f).read_text() for f in ID_FILES]

    same = {n: ids(a.work / f"{n}-{a.repeats - 1}") == ids(a.work / f"{names[0]}-"
                                                          f"{a.repeats - 1}") for n in names}
    report = {"records": a.records, "data": facts, "master": a.master, "same_ids": same,
              "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "variants": {n: {"median_s": round(statistics.median(m["seconds"] for m in ms), 2),
                               "seconds": [round(m["seconds"], 2) for m in ms],
                               "median_cpu_s": statistics.median(m["cpu_seconds"] for m in ms),
                               "cpu_seconds": [m["cpu_seconds"] for m in ms],
                               "timings": [m["timings"] for m in ms]}
                           for n, ms in runs.items()}}
    a.out.write_text(json.dumps(report, indent=2))
    print(json.dumps({n: v["median_s"] for n, v in report["variants"].items()}, indent=2))
    print(json.dumps(same))
    return 0 if all(same.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
