"""The daily DAG as it is deployed on more than one host: Airflow's CeleryExecutor with two
workers, each on a host of its own (its own network namespace, and a mount namespace with a
private /tmp holding its working folder: harness.services.lab), Spark on a standalone master
whose worker is a third such host, and nothing shared but the network to Redis (the broker),
PostgreSQL (Airflow's metadata and kafka-recon's store), Kafka and the S3 server holding the
run folders.

The live scheduler makes the daily run of the latest closed day when the DAG is unpaused, once
both workers are ready; its staging tasks land on both. While its Spark step runs, an ad-hoc run
of the same window is triggered and refused, naming it. The host running the Spark step then
dies; once the window's lease runs out, a re-run takes the window and finishes on the other
host. The result is exact to the id, its files are in the bucket, and the page serves its report
from there to a logged-in user."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from harness.services.airflow import (
    AirflowServers,
    celery_env,
    celery_worker,
    ship,
    worker_ready,
)
from harness.services.kafka import KafkaCluster
from harness.services.lab import Host, Lab
from harness.services.postgres import PostgresServer
from harness.services.redis import RedisServer
from harness.services.s3 import S3Server
from harness.services.smtp import MailCatcher
from harness.services.spark import SparkStandalone
from kafka_recon.settings import REPO_ROOT
from tests.integration.engine_harness import Scenario

pytestmark = pytest.mark.integration

LOST = {7, 23}
BUCKET = "recon-runs"
DAILY, ADHOC = "recon__f", "recon_adhoc"
# a dead host's window is free again this soon. Between a run's tasks nothing renews the lease
# (each task renews it while it runs), so it must outlast the wait of the next task in Celery's
# queue: 10 s (the least allowed) did not on a loaded CI host (with the Spark step renewing it
# only once its driver ran), and the ad-hoc run took the window
LEASE_SECONDS = 30


@dataclass
class TwoHosts:
    airflow: AirflowServers
    workers: list[Host]
    spark: SparkStandalone
    s3: S3Server
    mail: MailCatcher
    start: datetime
    end: datetime


@pytest.fixture(scope="module")
def hosts() -> Iterator[TwoHosts]:
    # outside /tmp, which each host replaces with its own; PostgreSQL, which runs as its own
    # user, must enter it. What the hosts read of it is the deployment (`deploy/`), once
    base = Path(tempfile.mkdtemp(prefix="kafka-recon-two-hosts-", dir="/var/tmp"))
    base.chmod(0o755)
    # the hosts keep the software installed (the checkout and its virtualenv), wherever it is
    lab = Lab("rcn", 77, keep=[REPO_ROOT]).start()
    started: list[Any] = []
    try:
        w1, w2, spark_host = lab.host("w1"), lab.host("w2"), lab.host("spark1")
        at = lab.address
        pg = PostgresServer(base / "pg", host=at).start()
        started.append(pg)
        redis = RedisServer(base / "redis", host=at).start()
        started.append(redis)
        kafka = KafkaCluster(base / "kafka", host=at).start()
        started.append(kafka)
        s3 = S3Server(base / "s3", host=at).start()
        started.append(s3)
        s3.make_bucket(BUCKET)
        mail = MailCatcher(base / "mail", host=at).start()
        started.append(mail)
        spark = SparkStandalone(base / "spark", cores=2, memory="2g", host=at,
                                worker_host=spark_host).start()
        started.append(spark)

        # the latest closed day: the window the live scheduler's daily run reconciles
        end = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        start = end - timedelta(days=1)
        scn = Scenario(base, kafka.bootstrap, up_url=pg.create_database("up"),
                       down_url=pg.create_database("down"), origin=start)
        scn.flow_through(40, sink_lacks=LOST, every=10)
        deploy = ship(base / "deploy", scn.config.read_text())
        store = pg.create_database("recon_store")
        meta = pg.create_database("airflow")
        env = celery_env(
            base / "airflow", deploy, at=at, smtp_port=mail.port, redis_url=redis.url,
            metadata_url=meta, store_url=store, s3_connection=s3.connection(),
            runs=f"s3://recon_s3@{BUCKET}/runs", spark_master=spark.master,
            extra={"KAFKA_RECON_LEASE_SECONDS": str(LEASE_SECONDS)})
        servers = AirflowServers(base / "airflow", env, database_url=meta, host=at,
                                 executor="CeleryExecutor").start()
        started.append(servers)
        logs = {h.name: base / f"{h.name}.log" for h in (w1, w2)}
        for h in (w1, w2):
            celery_worker(h, servers.env, deploy, logs[h.name])
        # a run's tasks land on both hosts only if both take tasks from its start: a worker
        # still starting, slow on a loaded CI host, would leave them all to the other
        _until("both Celery workers ready",
               lambda: all(worker_ready(p) for p in logs.values()), 300)
        yield TwoHosts(servers, [w1, w2], spark, s3, mail, start, end)
    finally:
        for service in reversed(started):
            service.stop()
        lab.stop()
        shutil.rmtree(base, ignore_errors=True)


def _wait(h: TwoHosts, dag: str, run_id: str, timeout: float = 900) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code, run = h.airflow.api("GET", f"/dags/{dag}/dagRuns/{run_id}")
        assert code == 200, run
        if run["state"] in ("success", "failed"):
            return dict(run)
        time.sleep(3)
    raise AssertionError(f"{dag} {run_id} did not finish in {timeout:.0f}s; see the logs in "
                         f"{h.airflow.home}")


def _daily_run(h: TwoHosts, timeout: float = 180) -> str:
    """The run the live scheduler made of the latest closed day."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code, body = h.airflow.api("GET", f"/dags/{DAILY}/dagRuns")
        assert code == 200, body
        if body["dag_runs"]:
            return str(body["dag_runs"][0]["dag_run_id"])
        time.sleep(2)
    raise AssertionError("the scheduler made no daily run")


def _tasks(h: TwoHosts, dag: str, run_id: str) -> list[dict[str, Any]]:
    code, body = h.airflow.api("GET", f"/dags/{dag}/dagRuns/{run_id}/taskInstances")
    assert code == 200, body
    return list(body["task_instances"])


def _log(h: TwoHosts, dag: str, run_id: str, task: str) -> str:
    code, body = h.airflow.api("GET", f"/dags/{dag}/dagRuns/{run_id}/taskInstances/{task}/logs/1")
    assert code == 200, body
    return json.dumps(body)


def _failures(h: TwoHosts, runs: dict[str, str]) -> str:
    """What failed, and its log's end: a failing test says why (the logs die with the hosts)."""
    out = []
    for dag, run_id in runs.items():
        for t in _tasks(h, dag, run_id):
            if t["state"] == "failed":
                out.append(f"{dag} {t['task_id']} failed on {t['hostname']}: "
                           f"{_log(h, dag, run_id, t['task_id'])[-1500:]}")
            elif t["state"] != "success":
                out.append(f"{dag} {t['task_id']} {t['state']}")
    return "\n".join(out)


def _state(h: TwoHosts, dag: str, run_id: str, task: str) -> dict[str, Any]:
    return {t["task_id"]: t for t in _tasks(h, dag, run_id)}.get(task, {})


def _until(what: str, check: Any, timeout: float = 600) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(1)
    raise AssertionError(f"{what}: not within {timeout:.0f}s")


def test_the_daily_dag_on_two_celery_hosts_holds_its_window_survives_a_dead_host_and_is_exact(
        hosts: TwoHosts) -> None:
    h = hosts
    window = {"start": h.start.strftime("%Y-%m-%dT%H:%M:%SZ"),
              "end": h.end.strftime("%Y-%m-%dT%H:%M:%SZ")}
    adhoc_conf = {"flow": "f", **window, "replays": 2, "email": False}
    h.airflow.unpause(ADHOC)
    h.airflow.unpause(DAILY)  # the live scheduler makes the latest closed day's run
    daily = _daily_run(h)

    # the daily run's tasks run one after another (staging is one task since f0790c8), so which
    # host takes each is Celery's choice: each ran on a lab host, and which hosts served is
    # checked once one of them has died (the survivor must take the re-run)
    def running() -> dict[str, Any] | None:
        t = _state(h, DAILY, daily, "replay_reconcile")
        return t if t.get("state") == "running" else None

    _until("the daily run's Spark step running", running)
    where = {t["task_id"]: t["hostname"] for t in _tasks(h, DAILY, daily) if t["hostname"]}
    assert set(where.values()) <= {w.address for w in h.workers}, where

    # the ad-hoc run of the same window, triggered while the daily run holds it (triggered at
    # once, it may run start to end before the scheduler has begun the daily run: both then
    # rightly succeed, one after the other), is refused at its start, naming the holder
    code, adhoc = h.airflow.api("POST", f"/dags/{ADHOC}/dagRuns",
                                {"logical_date": None, "conf": adhoc_conf})
    assert code == 200, adhoc
    runs = {DAILY: daily, ADHOC: adhoc["dag_run_id"]}

    def decided() -> dict[str, Any] | None:
        states = {d: _state(h, d, r, "begin").get("state") for d, r in runs.items()}
        return states if all(s in ("success", "failed") for s in states.values()) else None

    began = _until("both runs' begin decided", decided)
    assert began == {DAILY: "success", ADHOC: "failed"}, _failures(h, runs)
    said = _log(h, ADHOC, runs[ADHOC], "begin")
    assert f"another run of this window is under way ({DAILY}/{daily} on " in said, said

    # the host running the Spark step dies with the window held
    spark_step = running()
    assert spark_step, f"the Spark step ended before the ad-hoc run was refused: {where}"
    dead = next(w for w in h.workers if w.address == spark_step["hostname"])
    alive = next(w for w in h.workers if w is not dead)
    dead.kill()

    # its lease expires (nothing renews it); a re-run of the window then holds it and finishes
    time.sleep(LEASE_SECONDS + 3)
    code, rerun = h.airflow.api("POST", f"/dags/{ADHOC}/dagRuns",
                                {"logical_date": None, "conf": {**adhoc_conf, "email": True}})
    assert code == 200, rerun
    again = {ADHOC: rerun["dag_run_id"]}
    _wait(h, ADHOC, rerun["dag_run_id"])
    tasks = {t["task_id"]: t for t in _tasks(h, ADHOC, rerun["dag_run_id"])}
    done = {k for k, t in tasks.items() if t["state"] == "success"}
    assert {"begin", "stage", "replay_reconcile", "notify"} <= done, \
        _failures(h, again)
    # the report was written, and its validation of the findings failed the task, once
    assert (tasks["report"]["state"], tasks["report"]["try_number"]) == ("failed", 1), \
        _failures(h, again)
    assert tasks["replay_reconcile"]["hostname"] == alive.address
    served = set(where.values()) | {t["hostname"] for t in tasks.values() if t["hostname"]}
    assert served == {w.address for w in h.workers}, served
    # the window's findings turn the run red at its end, by design
    verdict = _log(h, ADHOC, rerun["dag_run_id"], "verdict")
    assert "FINDINGS - 2 record(s) lost on the consume side (topic->sink)" in verdict, verdict
    apps = h.spark.state().get("completedapps", [])
    assert sum(a["name"].startswith("kafka-recon") for a in apps) >= 1, apps

    # exact to the id, every file in the bucket
    folder = h.s3.data / BUCKET / "runs" / "f" / f"{window['start']}_{window['end']}".replace(
        ":", "")
    result = json.loads((folder / "result.json").read_text())
    assert result["status"] == "findings", result.get("reasons")
    assert (folder / "missing" / "topic__sink.csv").read_text() == \
        "id\n" + "".join(f"{i}\n" for i in sorted(map(str, LOST)))  # sorted as text
    assert (folder / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html").is_file()
    journal = {json.loads(p.read_text())["step"]: json.loads(p.read_text())["state"]
               for p in (folder / "steps").iterdir()}
    assert journal["replay"] == journal["reconcile"] == "done", journal

    # the page serves the report from the bucket to a logged-in user; the owner got the mail
    req = urllib.request.Request(
        f"{h.airflow.url}/recon/runs/f/{folder.name}/report.html",
        headers={"Authorization": f"Bearer {h.airflow.token()}"})
    with urllib.request.urlopen(req, timeout=30) as page:
        assert page.status == 200 and b"topic__sink.csv" in page.read()
    mails = [m for m in h.mail.messages() if "FINDINGS" in str(m["Subject"])]
    assert mails and all(m["To"] == "owner@example.com" for m in mails)
