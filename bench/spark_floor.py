"""The floor under any Spark run of a flow: the least work a run must do, and nothing else.

    python -m bench.spark_floor --config flows.yaml --flow F --start T --end T \
        [--master local[2]] [--replays N]

A fresh Spark with kafka-recon's own session (settings, jars, class archive) reads the flow's
inputs as a run does: every Kafka tier's window (with the disorder margins) N times through the
window reader, each with its own group, and every SQL tier once over JDBC in kafka-recon's time
slices. It holds every tier's ids as a run holds its records (the first read's ids extracted
from the values by kafka-recon's own extraction; a later read is only read), and then groups
the ids of every tier by id once, a count per tier: the least comparison that names missing,
unexpected and duplicate ids. Each step is reduced to a count and an xor of a hash of every
column. Prints one JSON line: the seconds of the Spark start and of each step.

Its slope (seconds per million records, `make bench`'s reader h) is what reading the inputs
and the one grouping cost in Spark on this machine; what a run spends above it is the rest of
the comparison (event times, buckets, the per-hop marks, the id files, the evidence).
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from functools import reduce
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.spark_floor",
                                description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, required=True)
    p.add_argument("--flow", required=True)
    p.add_argument("--start", required=True)
    p.add_argument("--end", required=True)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--replays", type=int, help="the topic's reads (default: the flow's replays)")
    a = p.parse_args(argv)

    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    from kafka_recon.config import KafkaTier, SqlTier, load_flow
    from kafka_recon.settings import spark_jars
    from kafka_recon.sources.kafka_client import endpoint
    from kafka_recon.sources.topic import GROUP_PREFIX, read_ranges
    from kafka_recon.spark.read import read_sql_tier
    from kafka_recon.spark.replay import (
        extract_records,
        read_window,
        window_schemas,
    )
    from kafka_recon.spark.session import session
    from kafka_recon.window import Window

    flow = load_flow(a.config, a.flow)
    window = Window.parse(a.start, a.end, flow.longest_grace)
    t0 = time.monotonic()
    spark = session(f"kafka-recon floor {flow.name}", master=a.master, jars=spark_jars())
    spark.sparkContext.setLogLevel("WARN")
    out: dict[str, Any] = {"spark_start_s": round(time.monotonic() - t0, 2), "steps": []}

    def reduced(name: str, df: DataFrame) -> None:
        t = time.monotonic()
        row = df.agg(F.count(F.lit(1)).alias("n"),
                     F.bit_xor(F.xxhash64(*df.columns)).alias("h")).collect()[0]
        out["steps"].append({"step": name, "rows": row["n"],
                             "seconds": round(time.monotonic() - t, 2)})

    held: list[DataFrame] = []  # every tier's ids, held as a run holds its records
    for tier in flow.tiers:
        if isinstance(tier, KafkaTier):
            ep = endpoint(tier)
            ranges = read_ranges(ep, flow, tier, window)
            record = flow.record_of(tier)
            schemas = window_schemas(spark, ep, tier, record, ranges)
            for i in range(1, (a.replays or flow.replays) + 1):
                group = f"{GROUP_PREFIX}{flow.name}-floor-{uuid.uuid4().hex[:12]}-r{i}"
                raw = read_window(spark, ep, tier.topic, ranges, group, tier.isolation_level)
                if i == 1:
                    held.append(extract_records(raw, record, schemas).select("id").cache())
                    reduced(f"{tier.name} r1, its ids held", held[-1])
                else:
                    reduced(f"{tier.name} r{i}, read only", raw)
        elif isinstance(tier, SqlTier):
            held.append(read_sql_tier(spark, tier, window).select("id").cache())
            reduced(f"{tier.name}, its ids held", held[-1])
    tagged = reduce(lambda x, y: x.unionByName(y),
                    [df.select("id", F.lit(i).alias("tier")) for i, df in enumerate(held)])
    # shuffled by id before any aggregation, as the run's comparison is (an id is once per
    # tier: a partial aggregation of each partition merges nothing)
    reduced("every tier's ids grouped by id once", tagged.repartition("id").groupBy("id").agg(
        *(F.count(F.when(F.col("tier") == i, 1)).alias(f"n{i}") for i in range(len(held)))))
    out["seconds"] = round(time.monotonic() - t0, 2)
    spark.stop()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
