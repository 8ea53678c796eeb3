"""`make bench`: replay-and-reconcile throughput against Kafka's own consumer and a plain client.

    python -m bench.run [--records 1000000,5000000,10000000] [--repeats 3]
                        [--masters local[2],local[1],standalone] [--before <worktree>]

For each size, on one embedded broker, one topic of N JSON records (~300 bytes, 6 partitions,
keys set) with known write-side losses and duplicates, and upstream and sink tables with known
consume-side losses and duplicates. Each reader runs `--repeats` times in the same run,
interleaved; medians and spreads go to bench/results.json, which bench.report turns into
docs/performance.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.report import SCALE
from harness.services.base import java_binary
from harness.services.kafka import KafkaCluster
from kafka_recon.settings import REPO_ROOT, kafka_classpath

VENV_BIN = Path(sys.executable).parent
TOPIC = "bench-orders"
PARTITIONS = 6
PADDING = "x" * 170  # brings a value to about 300 bytes
REPLAYS = 2  # the flow's replays: the slope target scales with it


# ------------------------------------------------------------------ measuring
def _stat(pid: int | str) -> list[str]:
    """/proc/<pid>/stat's fields after the command name (empty once the process is gone)."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _tree(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and (fields := _stat(d.name)):
            children.setdefault(int(fields[1]), []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def _rss_kb(pid: int) -> tuple[str, int, int]:
    """A process's program name, resident kB, and of those its anonymous kB (its heaps and
    stacks). The rest is file pages (its libraries, mapped files), which the kernel takes back
    from an idle process when the page cache needs room: a resident figure can fall while the
    process holds as much as ever."""
    try:
        status = (Path("/proc") / str(pid) / "status").read_text()
    except OSError:
        return "", 0, 0
    # "Key:\tvalue"; a size's value is "<n> kB", a name may hold spaces, and some keys have
    # no value (Groups, for root)
    fields = {key: value.strip()
              for key, _, value in (ln.partition(":") for ln in status.splitlines())}

    def kb(key: str) -> int:
        return int((fields.get(key, "").split() or ["0"])[0])
    return fields.get("Name", ""), kb("VmRSS"), kb("RssAnon")


def _cpu_ticks(pid: int) -> int:
    fields = _stat(pid)
    return int(fields[11]) + int(fields[12]) if fields else 0  # utime + stime


def measured(cmd: list[str], env: dict[str, str] | None = None,
             timeout: float = 3600, ok: tuple[int, ...] = (0,),
             server: int | None = None) -> dict[str, Any]:
    """Run cmd; wall seconds, the peak resident memory of each program in its tree, and the
    CPU seconds of the tree (each process as last seen: a short-lived helper may be missed;
    on a shared machine, steadier than the wall time). `server`: a process serving cmd
    (a Spark Connect server), whose tree's memory counts as `<program> (server)` and whose
    CPU counts too, as the ticks it spent while cmd ran."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    peak: dict[str, int] = {}
    anon: dict[str, int] = {}
    ticks: dict[int, int] = {}
    stop = threading.Event()

    served = _tree(server) if server else []
    before = {pid: _cpu_ticks(pid) for pid in served}

    def poll() -> None:
        while not stop.is_set():
            for pid in _tree(proc.pid):
                name, rss, rss_anon = _rss_kb(pid)
                if name:
                    peak[name] = max(peak.get(name, 0), rss)
                    anon[name] = max(anon.get(name, 0), rss_anon)
                    ticks[pid] = max(ticks.get(pid, 0), _cpu_ticks(pid))
            for pid in served:
                name, rss, _ = _rss_kb(pid)
                if name:
                    peak[f"{name} (server)"] = max(peak.get(f"{name} (server)", 0), rss)
                    ticks[pid] = max(ticks.get(pid, 0), _cpu_ticks(pid) - before[pid])
            stop.wait(0.2)

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    out, err = proc.communicate(timeout=timeout)
    stop.set()
    t.join()
    seconds = time.monotonic() - t0
    if proc.returncode not in ok:
        # the whole error output kept: its tail alone lost a driver's first error once
        kept = REPO_ROOT / "bench-out" / f"failed-{datetime.now(UTC):%Y%m%dT%H%M%S}.log"
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(f"$ {' '.join(cmd)}\n{err}")
        raise RuntimeError(f"{' '.join(cmd[:3])} failed ({proc.returncode}; its whole error "
                           f"output: {kept}): {err[-3000:]}")
    return {"seconds": seconds, "peak_rss_mb": {k: round(v / 1024, 1) for k, v in peak.items()},
            "peak_anon_mb": {k: round(v / 1024, 1) for k, v in anon.items()},
            "cpu_seconds": round(sum(ticks.values()) / os.sysconf("SC_CLK_TCK"), 1),
            "stdout": out, "stderr": err[-2000:], "returncode": proc.returncode}


def summary(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3)}


# ------------------------------------------------------------------ data
def fill(work: Path, bootstrap: str, n: int, start: datetime) -> dict[str, Any]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    rnd = random.Random(42)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
        fut.result(30)
    lost_write = set(rnd.sample(range(1, n + 1), max(1, n // 10000)))
    dup_topic = set(rnd.sample(sorted(set(range(1, n + 1)) - lost_write), max(1, n // 20000)))
    survivors = [i for i in range(1, n + 1) if i not in lost_write]
    lost_consume = set(rnd.sample(survivors, max(1, n // 5000)))
    dup_sink = set(rnd.sample(sorted(set(survivors) - lost_consume), max(1, n // 20000)))
    span = 86_400
    times = {i: start + timedelta(seconds=(i * 7919) % span) for i in range(1, n + 1)}

    def text(t: datetime) -> str:
        return t.strftime("%Y-%m-%d %H:%M:%S")

    with sqlite3.connect(work / "upstream.db") as con:
        con.execute("CREATE TABLE orders (order_id INTEGER PRIMARY KEY, created_at TEXT)")
        con.executemany("INSERT INTO orders VALUES (?, ?)",
                        ((i, text(times[i])) for i in range(1, n + 1)))
    with sqlite3.connect(work / "sink.db") as con:
        con.execute("CREATE TABLE orders_copy (order_id INTEGER, created_at TEXT)")
        rows = [i for i in survivors if i not in lost_consume] + sorted(dup_sink) \
            + sorted(dup_topic - lost_consume)
        con.executemany("INSERT INTO orders_copy VALUES (?, ?)",
                        ((i, text(times[i])) for i in rows))

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 1_000_000, "acks": "1"})
    t0 = time.monotonic()
    for i in survivors + sorted(dup_topic):
        t = times[i]
        value = json.dumps({"order_id": i, "created_at": t.strftime("%Y-%m-%dT%H:%M:%SZ"),
                            "customer": f"customer-{i % 997}", "amount": (i % 50000) / 100,
                            "currency": "EUR", "note": PADDING})
        while True:
            try:
                p.produce(TOPIC, key=str(i), value=value, timestamp=int(t.timestamp() * 1000))
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    assert p.flush(120) == 0
    return {"records_in_topic": len(survivors) + len(dup_topic), "upstream": n,
            "lost_write": len(lost_write), "dup_topic": len(dup_topic),
            "lost_consume": len(lost_consume), "dup_sink": len(dup_sink),
            "fill_seconds": round(time.monotonic() - t0, 1)}


FLOW = """
flows:
  bench:
    owners: [bench@example.com]
    bucket: 1h
    grace: 10m
    replays: {replays}
    record: {{id: "$.order_id", event_time: "$.created_at"}}
    tiers:
      - name: upstream
        type: sql
        conn: "sqlite:///{work}/upstream.db"
        ids: "SELECT order_id AS id, created_at AS event_time FROM orders
              WHERE created_at >= :start AND created_at < :end"
      - name: topic
        type: kafka
        bootstrap: "{bootstrap}"
        topic: "{topic}"
      - name: sink
        type: sql
        conn: "sqlite:///{work}/sink.db"
        ids: "SELECT order_id AS id, created_at AS event_time FROM orders_copy
              WHERE created_at >= :start AND created_at < :end"
"""


# ------------------------------------------------------------------ the readers
def readers(work: Path, bootstrap: str, n_topic: int, start: datetime, end: datetime,
            masters: list[tuple[str, str]], before: Path | None) -> dict[str, list[str]]:
    """The command of each reader; masters[0] is the main master (label, URL), the others run
    d alone, as `d_kafka_recon@<label>`."""
    env_py = [str(VENV_BIN / "python")]
    # the console script: the Python driver has its own name in the memory figures
    recon = [str(VENV_BIN / "kafka-recon"), "run", "--config", str(work / "flows.yaml"),
             "--flow", "bench", "--start", start.isoformat(), "--end", end.isoformat()]
    out = {
        "a_kafka_consumer_perf": [
            java_binary(), "-Xmx1g", "-cp", kafka_classpath(),
            "org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", bootstrap,
            "--topic", TOPIC, "--messages", str(n_topic), "--timeout", "60000",
            "--group", "perf-{run}"],
        "b_plain_python": [*env_py, "-m", "bench.plain_consumer", "--bootstrap", bootstrap,
                           "--topic", TOPIC, "--upstream", str(work / "upstream.db"),
                           "--out", str(work / "plain-missing-{run}.csv")],
        "d_kafka_recon": [*recon, "--master", masters[0][1], "--out", str(work / "run-{run}")],
        "e_quick_estimate": [*env_py, "-c",
                             "import sys,time;from kafka_recon.sources.topic import window_offsets;"
                             "from kafka_recon.sources.kafka_client import KafkaEndpoint;"
                             "t=time.monotonic();r=window_offsets(KafkaEndpoint(sys.argv[1]),"
                             "sys.argv[2],"
                             "int(sys.argv[3]),int(sys.argv[4]));"
                             "print(sum(x.end-x.start for x in r), time.monotonic()-t)",
                             bootstrap, TOPIC, str(int(start.timestamp() * 1000)),
                             str(int((end + timedelta(minutes=10)).timestamp() * 1000))],
        "f_duckdb_script": [*env_py, "-m", "bench.duckdb_reader", "--bootstrap", bootstrap,
                            "--topic", TOPIC, "--upstream", str(work / "upstream.db"),
                            "--sink", str(work / "sink.db"), "--start", start.isoformat(),
                            "--end", end.isoformat(), "--out", str(work / "duckdb-{run}")],
    }
    if not masters[0][1].startswith("sc://"):
        # the floor: the same Spark reading the same inputs and grouping their ids once
        out["h_spark_floor"] = [*env_py, "-m", "bench.spark_floor", "--config",
                                str(work / "flows.yaml"), "--flow", "bench", "--start",
                                start.isoformat(), "--end", end.isoformat(), "--master",
                                masters[0][1]]
    if before is not None:
        # the same command on the code before this change: its checkout first on the path
        out["g_kafka_recon_before"] = [f"PYTHONPATH={before}", *recon, "--master", masters[0][1],
                                       "--out", str(work / "before-{run}")]
    for label, url in masters[1:]:
        spark = ["--remote", url] if url.startswith("sc://") else ["--master", url]
        out[f"d_kafka_recon@{label}"] = [*recon, *spark, "--out", str(work / "run-{run}")]
    if shutil.which("kcat"):
        out["c_kcat"] = ["sh", "-c", f"kcat -C -b {bootstrap} -t {TOPIC} -e -q -f '%o\\n' | "
                                     "wc -l"]
    return out


def bench(n: int, repeats: int, masters: list[tuple[str, str]], base: Path,
          only: set[str] | None = None, before: Path | None = None,
          other_repeats: int | None = None, servers: dict[str, int] | None = None,
          warmups: int = 0) -> dict[str, Any]:
    """One size: a fresh broker and tables, every chosen reader `repeats` times, interleaved
    (the other masters' runs of d only in the first `other_repeats`, but a Spark Connect
    server's every time: what it is for is the runs after its first). `servers`: the pid of
    the server behind a master's label, whose memory and CPU count for its runs."""
    work = base / f"n{n}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start, end = today - timedelta(days=1), today
    kafka = KafkaCluster(work / "kafka", size=1, heap="1g", lean=False).start()
    try:
        facts = fill(work, kafka.bootstrap, n, start)
        (work / "flows.yaml").write_text(FLOW.format(work=work, bootstrap=kafka.bootstrap,
                                                     topic=TOPIC, replays=REPLAYS))
        base_env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
                    "PYTHONPATH": str(REPO_ROOT)}
        chosen = {name: cmd for name, cmd in readers(
            work, kafka.bootstrap, facts["records_in_topic"], start, end, masters,
            before).items() if not only or name.split("_")[0] in only}
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in chosen}
        # a deployed server runs window after window: it is judged warm, after `warmups` runs
        # of each size that are not measured (its JIT compiles what the runs repeat)
        warmed = {name for name in chosen if "@" in name
                  and name.split("@", 1)[1] in (servers or {})} if warmups else set()
        for name in warmed:
            for w in range(warmups):
                argv = [c.replace("{run}", f"{name}-warmup{w}") for c in chosen[name]]
                measured(argv, env=dict(base_env), ok=(0, 1))
        # interleaved (a, b, ..., a, b, ...): the machine's drift falls on every reader alike
        for r in range(repeats):
            for name, cmd in chosen.items():
                label = name.split("@", 1)[1] if "@" in name else ""
                if label and label not in (servers or {}) and other_repeats is not None \
                        and r >= other_repeats:
                    continue
                env = dict(base_env)
                argv = [c.replace("{run}", f"{name}-{r}") for c in cmd]
                while argv and argv[0].startswith("PYTHONPATH="):
                    env["PYTHONPATH"] = argv.pop(0).split("=", 1)[1]
                recon = name.startswith(("d_", "g_"))
                # kafka-recon exits 1 for a run with findings
                m = measured(argv, env=env, ok=(0, 1) if recon else (0,),
                             server=(servers or {}).get(label))
                if recon:
                    m["timings"] = _timings(work / argv[argv.index("--out") + 1])
                elif name == "h_spark_floor":  # its last line: the seconds of each step
                    m["timings"] = json.loads(m["stdout"].strip().splitlines()[-1])
                runs[name].append(m)
                print(f"n={n} {name} run {r + 1}: {m['seconds']:.2f}s {m['peak_rss_mb']} "
                      f"anonymous {m['peak_anon_mb']}", flush=True)
        results: dict[str, Any] = {}
        for name, ms in runs.items():
            secs = [m["seconds"] for m in ms]
            results[name] = {
                "seconds": summary(secs),
                "runs_s": [round(x, 3) for x in secs],  # in the order run
                "records_per_second": round(facts["records_in_topic"]
                                            / statistics.median(secs)),
                **{kind: {k: max(m[kind].get(k, 0) for m in ms) for k in ms[-1][kind]}
                   for kind in ("peak_rss_mb", "peak_anon_mb")},
                "last_stdout": ms[-1]["stdout"][-400:],
                **({"warmups": warmups} if name in warmed else {}),
                **({"timings": [m["timings"] for m in ms]} if "timings" in ms[-1] else {}),
            }
        same = same_answer(work, {k: len(v) for k, v in runs.items()})
        rps = {k: v["records_per_second"] for k, v in results.items()}
        return {"records": n, "data": facts, "results": results, "same_answer": same,
                "ratios": {f"d_over_{x[0]}": round(rps["d_kafka_recon"] / rps[x], 3)
                           for x in rps if "d_kafka_recon" in rps and x[0] in "abfg"
                           and "@" not in x}}
    finally:
        kafka.stop()


def _timings(run: Path) -> dict[str, Any]:
    path = run / "timings.json"
    return json.loads(path.read_text()) if path.exists() else {}


ID_FILES = [f"{kind}/{hop}.csv" for hop in ("upstream__topic", "topic__sink")
            for kind in ("missing", "unexpected", "duplicate")]


def same_answer(work: Path, ran: dict[str, int]) -> dict[str, Any]:
    """Does every reader that answers name the same ids as kafka-recon, in every id file (the
    plain script answers one: the ids missing upstream -> topic)?"""
    import csv

    def rows(path: Path) -> set[tuple[str, ...]]:
        with path.open(newline="") as fh:
            return {tuple(r) for r in list(csv.reader(fh))[1:]}

    if "d_kafka_recon" not in ran:
        return {}
    ours = work / f"run-d_kafka_recon-{ran['d_kafka_recon'] - 1}"
    out: dict[str, Any] = {}
    others = {name: work / f"{prefix}-{name}-{ran[name] - 1}" for name, prefix in
              [("f_duckdb_script", "duckdb"), ("g_kafka_recon_before", "before"),
               *[(name, "run") for name in ran if "@" in name]] if name in ran}
    for name, folder in others.items():
        diff = [f for f in ID_FILES if rows(folder / f) != rows(ours / f)]
        out[name] = {"files": len(ID_FILES), "differ": diff, "equal": not diff}
    if "b_plain_python" in ran:
        plain = {r[0] for r in rows(work / "plain-missing-b_plain_python-"
                                          f"{ran['b_plain_python'] - 1}.csv")}
        mine = {r[0] for r in rows(ours / "missing" / "upstream__topic.csv")}
        out["b_plain_python"] = {"files": 1, "equal": plain == mine,
                                 "differ": [] if plain == mine else ["missing/upstream__topic"]}
    out["all_equal"] = all(v["equal"] for v in out.values())
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="make bench", description=__doc__.splitlines()[0])
    p.add_argument("--records", default="1000000",
                   help="one size or several, comma separated (the scaling table needs three)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--masters", default="local[2]",
                   help="comma separated; the first runs every reader, the others run d only "
                        "(at the sizes of --other-sizes); `standalone` starts a Spark master "
                        "and one worker from PySpark's install, `connect` a Spark Connect "
                        "server (kafka-recon spark-server, on the first master) that d's runs "
                        "reach with --remote")
    p.add_argument("--other-sizes", default="",
                   help="the sizes the other masters run at (default: the smallest)")
    p.add_argument("--other-repeats", type=int, help="the other masters' repeats (default: all)")
    p.add_argument("--scale-readers", default="a,d,f,h",
                   help="the readers at the sizes above the smallest")
    p.add_argument("--scale-repeats", type=int, help="repeats above the smallest size "
                   "(default: --repeats)")
    p.add_argument("--once-readers", default="d,h",
                   help="the readers at a size above 10M, run once each: the scaling check "
                        "(the DuckDB script holds the whole window in memory, 11 GB at 10M)")
    p.add_argument("--work", type=Path, default=REPO_ROOT / "bench-out")
    p.add_argument("--out", type=Path, default=REPO_ROOT / "bench" / "results.json")
    p.add_argument("--readers", default="a,b,c,d,e,f,h",
                   help="which to run: a kafka perf, b plain python, c kcat, d us, e estimate, "
                        "f the DuckDB script, g us before (with --before), h the floor (the "
                        "same Spark: the reads and one grouping by id)")
    p.add_argument("--before", type=Path,
                   help="a checkout of the code to compare with (git worktree), run as g")
    p.add_argument("--keep", action="store_true", help="keep the topic and tables afterwards")
    p.add_argument("--warmups", type=int, default=5,
                   help="unmeasured runs through a Spark Connect server at each size before its "
                        "measured ones (a deployed server is warm); 0: judge its runs after "
                        "the first")
    a = p.parse_args(argv)
    sizes = sorted(int(x) for x in a.records.split(","))
    other_sizes = {int(x) for x in a.other_sizes.split(",") if x} or {sizes[0]}
    only = set(a.readers.split(","))
    if a.before:
        only.add("g")
    labels = a.masters.split(",")
    if labels[0] in ("connect", "standalone"):
        p.error(f"--masters {a.masters}: the first master runs the server or the cluster's "
                "driver, so it must be a Spark master URL such as local[2] "
                "(for example --masters local[2],connect)")
    with contextlib.ExitStack() as stack:
        urls, servers = {}, {}
        for label in labels:
            if label == "connect":  # one server for every size, as a deployment would have
                from harness.services.spark import SparkConnect

                server = SparkConnect(a.work / "connect", master=labels[0]).start()
                stack.callback(server.stop)
                urls[label] = server.url
                servers[label] = server.pid() or 0
            elif label == "standalone":
                from harness.services.spark import SparkStandalone

                cluster = SparkStandalone(a.work / "spark", cores=os.cpu_count() or 2,
                                          memory="4g").start()
                stack.callback(cluster.stop)
                urls[label] = cluster.master
            else:
                urls[label] = label
        masters = [(label, urls[label]) for label in labels]
        runs = []
        failed = None
        for n in sizes:
            here = masters if n in other_sizes else masters[:1]
            small, once = n == sizes[0], n > SCALE  # beyond: checks the scaling once
            chosen = only if small else set((a.once_readers if once
                                             else a.scale_readers).split(","))
            repeats = a.repeats if small else 1 if once else a.scale_repeats or a.repeats
            try:
                runs.append(bench(n, repeats, here,
                                  a.work, chosen | {"d"} if len(here) > 1 else chosen,
                                  a.before if "g" in chosen else None, a.other_repeats,
                                  servers, a.warmups))
            except RuntimeError as e:
                # the sizes measured before are written all the same; the page says this one
                # failed (bench.report), and the bench exits 1
                failed = {"records": n, "error": " ".join(str(e).split())}
                print(f"bench: {n} records: {e}", file=sys.stderr)
                break
            finally:
                if not a.keep:
                    shutil.rmtree(a.work / f"n{n}", ignore_errors=True)
    before = None
    if a.before:  # which code g ran: the worktree's commit
        before = subprocess.run(["git", "-C", str(a.before), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, check=False).stdout.strip()
    doc = {"sizes": runs, "repeats": a.repeats, "masters": labels, "replays": REPLAYS,
           "before": before or None, "failed": failed,
           "machine": {"cores": os.cpu_count(), "memory_gb": round(
               os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
               "python": platform.python_version(),
               "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}}
    a.out.write_text(json.dumps(doc, indent=2))
    print(json.dumps([{"records": r["records"], "ratios": r["ratios"],
                       "same_answer": r["same_answer"]} for r in runs], indent=2))
    wrong = [r["records"] for r in runs if r["same_answer"] and not r["same_answer"]["all_equal"]]
    if wrong:
        print(f"bench: the readers do not give the same answer at {wrong} records "
              "(see same_answer)", file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
