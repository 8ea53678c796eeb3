"""The steps of one reconciliation run, and the one function that runs them.

`execute` runs stage → replay → reconcile (→ report) in this process: the command line and the
drill call it. The Airflow DAGs run the same steps one task each (`kafka_recon.airflow.tasks`
and the Spark step's operator, and `kafka_recon/jobs/*.py` under spark-submit), through the
functions below. Every step goes through `_guarded`, which keeps the failure policy
(`kafka_recon.errors`):

- a `CannotRun` error propagates untouched (nothing is written);
- a source that cannot be read leaves an `inconclusive` result naming the source;
- anything else leaves an `inconclusive` result naming the step that failed;
- each step's start and end go into the run folder's journal, so a step whose process died
  (killed, out of memory) is named too, by `conclude`.

`begin` clears every output of the steps about to run: a failed re-run never shows an older
run's answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from kafka_recon.config import Flow, FlumeTier, KafkaTier, SqlTier, load_flow
from kafka_recon.errors import CannotRun, SourceUnreadable, StepFailed, UsageError, one_line
from kafka_recon.result.model import Result, inconclusive
from kafka_recon.runfiles.audit import Audit
from kafka_recon.runfiles.bands import Bands
from kafka_recon.runfiles.connectors import Connectors
from kafka_recon.runfiles.flight import Flight
from kafka_recon.runfiles.outcomes import Alerts, Timings, Validation
from kafka_recon.runfiles.repair import RepairDelivery, RepairPlan
from kafka_recon.runfiles.replays import Replays
from kafka_recon.runfiles.stage import Stage, StagedTier
from kafka_recon.runfolder import RunFolder
from kafka_recon.settings import config_path, keep_replays
from kafka_recon.stores import repairs
from kafka_recon.stores.lease import Lease
from kafka_recon.window import Window, parse_instant

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from upath import UPath

    from kafka_recon.sources.kafka_client import KafkaEndpoint


@dataclass(frozen=True)
class Run:
    """This flow, this window, this folder: what every step is given."""

    flow: Flow
    window: Window
    folder: RunFolder
    config_dir: Path

    @property
    def out(self) -> UPath:
        return self.folder.path


def load(flow_name: str, start: str, end: str, config: Path | None = None,
         out: str | Path | None = None) -> Run:
    """The flow, its window (with the flow's grace) and its run folder (default: under the
    runs root, one per flow and window; `out` may be in the runs root's object store)."""
    from kafka_recon.stores import objects

    config = config or config_path()
    flow = load_flow(config, flow_name)
    window = Window.parse(start, end, flow.longest_grace)
    folder = RunFolder(objects.at(out)) if out else RunFolder.of(objects.runs_root(),
                                                                 flow.name, window)
    return Run(flow, window, folder, config.parent)


def staged_tiers(flow: Flow) -> list[str]:
    """The tiers staged before Spark runs: every SQL and Flume tier (the topic is replayed)."""
    return [t.name for t in flow.tiers if isinstance(t, SqlTier | FlumeTier)]


# ------------------------------------------------------------------ the guard
def write_inconclusive(run: Run, reason: str) -> Result:
    result = inconclusive(run.flow.name, run.window.as_json(), reason,
                          bucket_seconds=int(run.flow.bucket.total_seconds()),
                          grace_seconds=int(run.flow.grace.total_seconds()))
    run.folder.write(result)
    return result


@contextmanager
def _guarded(run: Run, step: str, journal: str | None = None) -> Iterator[None]:
    """Journal the step; turn a failure into an inconclusive result naming its source or step."""
    name = journal or step
    run.folder.mark(name, "started")
    try:
        yield
    except CannotRun:
        run.folder.mark(name, "failed", "the run could not be made")
        raise
    except SourceUnreadable as exc:
        run.folder.mark(name, "failed", one_line(exc))
        write_inconclusive(run, f"a source could not be read: {one_line(exc)}")
        raise
    except Exception as exc:
        failed = exc if isinstance(exc, StepFailed) else StepFailed(step, exc)
        run.folder.mark(name, "failed", one_line(failed.cause))
        write_inconclusive(run, f"the '{failed.step}' step failed: {one_line(failed.cause)}")
        raise failed from exc
    run.folder.mark(name, "done")


# ------------------------------------------------------------------ the steps
ALL_STEPS = ("stage", "replay", "reconcile", "validate", "report", "alert")


def lease(run: Run) -> Lease:
    """The window's lease in kafka-recon's store: one run per window, across hosts."""
    return Lease.of(run.flow.name, run.window.as_json())


def begin(run: Run, owner: str | None = None) -> None:
    """Hold the window for this run (an Airflow run names itself `owner`; refused while another
    run holds it), then clear what every step writes, before any of them runs."""
    run.folder.make()
    if owner is not None:
        lease(run).claim(owner)
        run.folder.held_by(owner)
    run.folder.clear(*ALL_STEPS)


def check_owner(run: Run, owner: str) -> None:
    """A task of an Airflow run goes on only while its run holds the window (and renews it)."""
    lease(run).check(owner)
    run.folder.held_by(owner)


def finish(run: Run, owner: str) -> None:
    """The last task of an Airflow run lets the window go."""
    lease(run).release(owner)


@contextmanager
def held(run: Run, owner: str | None) -> Iterator[None]:
    """A task's body: checked to hold the window, which is renewed while the body runs."""
    if owner is None:
        yield
        return
    window = lease(run)
    window.check(owner)
    run.folder.held_by(owner)
    with window.kept(owner):
        yield


@contextmanager
def exclusive(run: Run) -> Iterator[None]:
    """A command line run holds the window, renewed, from its first step to its last. At the
    end it must still hold it: a store that stopped answering (or a lease that lapsed and was
    taken) cannot vouch that no other run wrote the window meanwhile, so the answer becomes
    inconclusive, naming why."""
    import contextlib
    import os
    import socket

    from kafka_recon.errors import ReconError, StoreUnreachable

    owner = f"process {os.getpid()} on {socket.gethostname()}"
    window = lease(run)
    window.claim(owner, pid=os.getpid())
    run.folder.held_by(owner)
    try:
        with window.kept(owner):
            yield
        try:
            window.check(owner)
        except ReconError as exc:
            write_inconclusive(run, f"this run's hold on the window could not be confirmed at "
                                    f"its end: {one_line(exc)}")
            report(run)
            raise
    finally:
        # a store that does not answer: the lease lapses by itself
        with contextlib.suppress(StoreUnreachable):
            window.release(owner)


def stage_tier(run: Run, tier_name: str) -> StagedTier:
    """Step 1a, one upstream or sink tier: check it and count it into staged/<tier>.json."""
    from kafka_recon.sources.flume import stage_flume_tier
    from kafka_recon.sources.sql import stage_sql_tier
    from kafka_recon.stores.snapshots import flume_snapshots

    tier = next((t for t in run.flow.tiers if t.name == tier_name), None)
    if not isinstance(tier, SqlTier | FlumeTier):
        raise UsageError(f"flow '{run.flow.name}' has no SQL or Flume tier '{tier_name}' "
                         f"(it has {staged_tiers(run.flow)})")
    with _guarded(run, "stage", f"stage {tier_name}"):
        staged = StagedTier(points=[stage_sql_tier(tier, run.window, run.flow.bucket)]
                            if isinstance(tier, SqlTier)
                            else stage_flume_tier(run.flow, tier, run.window,
                                                  flume_snapshots(run.flow.name, tier.name)))
        run.folder.write(staged, tier_name)
    return staged


def stage_topic(run: Run) -> None:
    """Step 1b, the topic (beside the tiers' staging, journalled under the topic tier's name):
    check the topic and kafka-recon's rights on it, audit the cluster, and keep the flight
    recorder's snapshots over the window."""
    from kafka_recon.cluster import preflight
    from kafka_recon.cluster.audit import audit_flow
    from kafka_recon.cluster.snapshots import flight_over
    from kafka_recon.sources.kafka_client import endpoint
    from kafka_recon.sources.topic import TopicMissing

    tier = run.flow.topic_tier
    with _guarded(run, "stage", f"stage {tier.name}"):
        ep = endpoint(tier)
        for each in run.flow.kafka_tiers:
            # every missing right named at once, before a client times out on one of them;
            # a topic that is not there is named as such (and with when the recorder last saw
            # it, when it was deleted during the window)
            at = ep if each is tier else endpoint(each)
            try:
                preflight.check(at, each.topic, each.consumer_groups)
            except TopicMissing as exc:
                raise TopicMissing(each.topic, at.where, _last_seen(run, each.name)) from exc
            _wait_for_transactions(run, each, at)
        # each connector as its Connect cluster shows it (one that does not answer is kept
        # as such: a cause says so, the run goes on); the audit reads their configs
        connectors = None
        if run.flow.connectors:
            from kafka_recon.sources.connect import snapshots

            connectors = snapshots(run.flow)
            run.folder.write(connectors)
            for c in connectors.connectors:
                loaded = run.flow.loaded_topic(c.tier)
                if c.role == "sink" and c.dead_letter_topic and loaded is not None:
                    preflight.check_queue(endpoint(loaded), c.dead_letter_topic, c.name)
        run.folder.write(audit_flow(run.flow, run.config_dir, ep, connectors))
        run.folder.write(flight_over(run.flow, run.window))
        # what each tier's buckets usually hold, from the flow's own history
        from kafka_recon.outputs.bands import bands_over

        run.folder.write(bands_over(run.flow, run.window))


def _wait_for_transactions(run: Run, tier: KafkaTier, ep: KafkaEndpoint) -> None:
    """Wait, within `transaction_wait_seconds`, for the transactions open on the partitions of
    the window's read to end: a read_committed read stops at the first of them, and the
    window's committed records after it would look lost. Still open: TransactionOpen, naming
    each (an inconclusive run, cause `open_transaction`)."""
    from kafka_recon.cluster.transactions import TransactionOpen, named, wait_for_stable
    from kafka_recon.errors import TopicError
    from kafka_recon.settings import transaction_wait_seconds
    from kafka_recon.sources.topic import read_ranges

    began = time.monotonic()
    try:
        blocked = wait_for_stable(ep, tier.topic, read_ranges(ep, run.flow, tier, run.window),
                                  transaction_wait_seconds())
    except TopicError:
        # the partitions' offsets cannot be read now (a partition without a leader): the audit
        # names why, and the replay, which needs them, checks again
        return
    if blocked:
        raise TransactionOpen(tier.topic, named(ep, tier.topic, blocked),
                              time.monotonic() - began)


def _last_seen(run: Run, tier: str) -> str:
    """What the flight recorder saw of a topic that no longer exists, within the window: it was
    deleted during it (the window's records went with it). Empty when it never saw it then."""
    from kafka_recon.cluster.snapshots import flight_over

    seen = flight_over(run.flow, run.window).topics.get(tier)
    if seen is None or not seen.snapshots or seen.last is None \
            or parse_instant(seen.last, "snapshot") < run.window.start:
        return ""
    return (f"it was deleted during the window (topic_deleted): the flight recorder saw it in "
            f"{seen.snapshots} snapshot(s) from {seen.first} to {seen.last}, and not since; "
            "its records of the window went with it, so nothing can be counted")


def gather_stage(run: Run) -> Stage:
    """Step 1c: every tier's staging gathered into stage.json, in the flow's order whatever
    order the tiers' staging finished in; the end of `stage`."""
    with _guarded(run, "stage"):
        staged = Stage(points=[p for name in staged_tiers(run.flow) for p in
                               run.folder.read(StagedTier, f"stage {name}", name).points])
        run.folder.write(staged)
    return staged


def stage(run: Run, side_by_side: bool = False) -> Stage:
    """Step 1, every tier, the topic, then stage.json: what the command line runs in one go,
    and Airflow's `stage` task. `side_by_side`: the tiers and the topic staged at once, each in
    a thread (each waits on its database or broker, not on a core); every part runs to its
    end, then the first failure is raised (each part journals its own and leaves the
    inconclusive result naming it)."""
    from functools import partial

    parts: list[Callable[[], object]] = [partial(stage_tier, run, name)
                                         for name in staged_tiers(run.flow)]
    parts.append(partial(stage_topic, run))
    if not side_by_side:
        for part in parts:
            part()
        return gather_stage(run)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(parts), thread_name_prefix="stage") as pool:
        futures = [pool.submit(part) for part in parts]
    failed = [exc for f in futures if (exc := f.exception()) is not None]
    if failed:
        # a run that cannot be made is said first, then a source, then any other step
        failed.sort(key=lambda e: 0 if isinstance(e, CannotRun) else
                    1 if isinstance(e, SourceUnreadable) else 2)
        raise failed[0]
    return gather_stage(run)


def staged_size(run: Run) -> int | None:
    """The window's size as staging counted it: its largest staged tier's records (None before
    staging, or for a flow with no staged tier). What a Spark started for the run is sized by
    (`kafka_recon.spark.conf.driver_heap`)."""
    staged = run.folder.read_if(Stage)
    return max((p.count for p in staged.points), default=None) if staged else None


def _ready_spark(run: Run, spark: SparkSession) -> None:
    """The session reaches the run folder (an object store's through S3A, its connection set
    on the session), and has kafka-recon's Spark defaults, the shuffles sized by the largest
    tier known so far: a staged count, or a topic's offsets a replay read (each replay grows
    them to its topic)."""
    from kafka_recon.spark.session import apply_defaults, set_hadoop
    from kafka_recon.stores.objects import spark_settings

    set_hadoop(spark, spark_settings(run.out))

    replayed = run.folder.read_if(Replays)
    sizes = [n] if (n := staged_size(run)) is not None else []
    sizes += [sum(r.end - r.start for r in t.read_offsets) for t in replayed.topics] \
        if replayed else []
    apply_defaults(spark, max(sizes, default=None))


def replay(run: Run, spark: SparkSession, replays: int | None = None,
           keep_records: bool = True, distinct: bool = True
           ) -> tuple[Replays, dict[str, DataFrame]]:
    """Step 2 on a Spark session (in process, or the one spark-submit made): replays.json, and
    each topic's first-replay records, cached for the reconcile step of the same application
    (by tier name). Without `distinct`, that reconcile counts the replays' distinct ids."""
    from kafka_recon.spark import replay as replay_step

    with _guarded(run, "replay"):
        _ready_spark(run, spark)
        replayed, records = replay_step.run(spark, run.flow, run.window, run.folder, replays,
                                            keep_records, distinct)
        run.folder.write(replayed)
    return replayed, records


def reconcile(run: Run, spark: SparkSession,
              topic_records: dict[str, DataFrame] | None = None) -> Result:
    """Step 3: the Spark comparison, then the typed result from its aggregates. The topics'
    records are the replay's, handed over in memory, or read from their Parquet folders."""
    from kafka_recon.result.build import build_result
    from kafka_recon.spark import reconcile as reconcile_step

    with _guarded(run, "reconcile"):
        _ready_spark(run, spark)
        replays = run.folder.read(Replays, "replay")
        staged = run.folder.read(Stage, "stage")
        aggregates = reconcile_step.run(spark, run.flow, run.window, run.folder, staged,
                                        replays, topic_records,
                                        run.folder.read_if(Connectors))
        run.folder.write(aggregates)
        if replays.uncounted():
            # the topic's distinct ids, as its one grouping by id counted them (the replay
            # left them: `replay_and_reconcile`); the same records, filtered the same way
            replays = replays.with_distinct({p.tier.name: t.distinct for p, t in
                                             zip(run.flow.points, aggregates.tiers, strict=True)})
            run.folder.write(replays)
        result = build_result(run.flow, run.window, aggregates, replays,
                              stage_reasons=staged.reasons, out=str(run.out),
                              audit=run.folder.read_if(Audit),
                              flight=run.folder.read_if(Flight),
                              connectors=run.folder.read_if(Connectors),
                              bands=run.folder.read_if(Bands))
        run.folder.write(result)
    return result


# Whether a replay that hands its records to the reconcile in memory counts their distinct
# ids itself: a grouping of the whole window by id, which the reconcile's one comparison does
# anyway (bench.tune's variant `replay_distinct` sets it back, to measure the difference).
REPLAY_COUNTS_DISTINCT = False


def replay_and_reconcile(run: Run, spark: SparkSession, replays: int | None = None,
                         keep_records: bool = False, clock: Stopwatch | None = None) -> Result:
    """Steps 2 and 3 in one Spark application: the first replay's records go to the reconcile
    from memory, never through a Parquet round trip (unless `keep_records`)."""
    clock = clock or Stopwatch()
    clock.count_jobs(spark)
    _, records = replay(run, spark, replays, keep_records, distinct=REPLAY_COUNTS_DISTINCT)
    clock.lap("replay")
    try:
        result = reconcile(run, spark, records)
        clock.lap("reconcile")
        return result
    finally:
        clock.stop_counting()
        from kafka_recon.spark.session import release

        release(records.values())


def conclude(run: Run) -> Result:
    """The run's result: the one the steps wrote, or, when a step did not finish, an
    inconclusive one naming it (so owners hear of a failed run, never of an older one)."""
    stopped = run.folder.unfinished()
    if run.folder.result.exists():
        result = Result.load(run.folder.result)
        # no journal: a folder written before journals were kept, or by hand
        if stopped is None or result.status == "inconclusive" or not run.folder.steps():
            return result
    if stopped is None:  # the journal says done, yet no result: say so, never guess
        stopped = ("reconcile", "it wrote no result")
    step, detail = stopped
    return write_inconclusive(run, f"the '{step}' step did not finish: {detail}")


@contextmanager
def _repairing(run: Run, spark: SparkSession | Callable[[], SparkSession]
               ) -> Iterator[tuple[SparkSession, str]]:
    """A repair's hold on the window, its ready session and the SHA-256 of the result it
    works from (what a plan's digest covers)."""
    with exclusive(run):
        digest = run.folder.result_digest()
        session = spark() if callable(spark) else spark
        _ready_spark(run, session)
        yield session, digest


def plan_repair(run: Run, spark: SparkSession | Callable[[], SparkSession]) -> RepairPlan:
    """A repair plan of the window's losses (`kafka_recon.spark.repair`), made from the run's
    finished result while holding the window, so that no re-run changes the result under it."""
    from kafka_recon.spark.repair import Loss, make_plan

    if not run.folder.result.exists():
        raise UsageError(f"{run.folder.path}: no result.json: run the window first")
    result = Result.load(run.folder.result)
    stopped = run.folder.unfinished()
    if stopped is not None or result.status == "inconclusive":
        why = (result.reasons[0] if result.reasons else "") if stopped is None \
            else f"the '{stopped[0]}' step did not finish"
        raise UsageError(f"{run.folder.path}: the run is inconclusive ({why}): run the window "
                         "again first")
    tiers = {t.name: t for t in run.flow.tiers}
    losses = [Loss(hop=f.hop, side=f.side, from_tier=tiers[f.hop.split("->")[0]],
                   ids_file=f.ids, lost=f.count)
              for f in result.findings if f.kind == "loss" and f.ids and "->" in f.hop]
    if not losses:
        raise UsageError(f"{run.folder.path}: the result holds no loss with its ids: nothing "
                         "to repair")
    with _repairing(run, spark) as (session, digest):
        plan = make_plan(session, run.flow, run.window, run.folder, losses, digest)
        report(run)  # the report (and the page) show the plan's summary
        return plan


def deliver_repair(run: Run, spark: SparkSession | Callable[[], SparkSession],
                   approved: str) -> RepairDelivery:
    """Re-deliver the window's plan, the one approved (`approved`: its digest, or the first
    12 or more of its characters), while holding the window (`kafka_recon.spark.repair`)."""
    from kafka_recon.spark.repair import deliver

    plan = run.folder.read_if(RepairPlan)
    if plan is None:
        raise UsageError(f"{run.folder.path}: no repair plan: make one first (repair plan)")
    if len(approved) < 12 or not plan.digest.startswith(approved):
        raise UsageError(f"plan {approved!r} is not the window's plan ({plan.digest[:12]}...): "
                         "deliver the plan that was approved, by its digest")
    with _repairing(run, spark) as (session, digest):
        delivery = deliver(session, run.flow, run.window, run.folder, plan, digest)
        # in the store too, for people and pages: which plan re-delivered what, and when
        repairs.record(run.flow.name, run.window.as_json(), delivery, str(run.folder.path))
        report(run)  # the report shows what was delivered
        return delivery


def answered(run: Run) -> bool:
    """Whether the Spark step gave the window an answer to validate: a result, every step it
    depends on done, and not inconclusive."""
    if not run.folder.result.exists() or run.folder.unfinished() is not None:
        return False
    return Result.load(run.folder.result).status != "inconclusive"


def validate(run: Run) -> Validation:
    """Step 4: the Great Expectations suites; a flow with no upstream count also gets the volume
    band learned from the history."""
    from kafka_recon.outputs.validate import validate_result

    result = Result.load(run.folder.result)
    volume = None
    if run.flow.points[0].name == run.flow.topic_tier.name:
        from kafka_recon.outputs import history

        volume = history.volume_band(run.flow, run.flow.topic_tier.name, run.window.start,
                                     run.window.end)
    hop_tolerance = {h.name: run.flow.tolerance_into(h.to) for h in result.hops}
    validation = validate_result(result, run.folder, run.flow.tolerance, volume,
                                 hop_tolerance, run.folder.read_if(Bands))
    run.folder.write(validation)
    return validation


def report(run: Run) -> dict[str, str]:
    """Step 5: the report of whatever the run concluded."""
    from kafka_recon.outputs.report import render_report

    return render_report(conclude(run), run.folder, run.folder.read_if(Validation))


def record_history(run: Run) -> dict[str, int]:
    """Step 6: the run's per-hop, per-bucket rows into the history; a re-run replaces them."""
    from kafka_recon.outputs import history

    result = conclude(run)
    report_path = run.folder.report
    return history.record(result, str(run.out),
                          str(report_path) if report_path.exists() else None, data_docs(run),
                          bands=run.folder.read_if(Bands))


def notify(run: Run, smtp_conn_id: str = "smtp_default") -> str:
    """Step 7: mail the report to the flow's owners."""
    from kafka_recon.outputs.notify import send_report

    result = conclude(run)
    for key in ("mail_html", "report_txt"):
        if not run.folder.file(key).exists():
            raise StepFailed("notify", FileNotFoundError(
                f"{run.folder.file(key)} is missing: the 'report' step has not run"))
    send_report(result, run.folder, run.flow.owners, smtp_conn_id)
    return result.subject()


def alert(run: Run) -> Alerts:
    """Step 7 beside the mail: the flow's Slack and PagerDuty alerts due for this window
    (kafka_recon.outputs.alerts), each tried; what each did is kept in alerts.json."""
    from kafka_recon.outputs import history
    from kafka_recon.outputs.alerts import send_alerts
    from kafka_recon.outputs.report import links

    result = conclude(run)
    previous = history.previous_status(run.flow.name, result.window.start)
    sent = Alerts(alerts=send_alerts(run.flow, result, previous,
                                     links(result, run.folder, data_docs(run))))
    run.folder.write(sent)
    return sent


def data_docs(run: Run) -> str | None:
    """Where the run's Data Docs are, when it was validated."""
    validation = run.folder.read_if(Validation)
    return validation.data_docs if validation else None


# ------------------------------------------------------------------ running them
class Stopwatch:
    """Seconds per step, and the Spark jobs each ran, kept in the run folder (timings.json):
    where a run's time goes, for tuning."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self.jobs: dict[str, int] = {}
        self._t = time.monotonic()
        self._spark: SparkSession | None = None
        self._group = ""
        self._seen = 0
        self._counted = False

    def count_jobs(self, spark: SparkSession) -> None:
        """Count the Spark jobs this thread runs from now on (one job group per run). Not
        through Spark Connect, which tells its sessions nothing of jobs: timings.json then
        has no `spark_jobs`."""
        import uuid

        from kafka_recon.spark.session import is_remote

        if self._spark is None and not is_remote(spark):
            self._counted = True
            self._spark, self._group = spark, f"kafka-recon-{uuid.uuid4().hex[:12]}"
            spark.sparkContext.setJobGroup(self._group, "kafka-recon run")

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.laps[name] = round(now - self._t, 3)
        self._t = now
        if self._spark is not None:
            seen = len(self._spark.sparkContext.statusTracker()
                       .getJobIdsForGroup(self._group))
            self.jobs[name], self._seen = seen - self._seen, seen

    def stop_counting(self) -> None:
        """The Spark steps are over (their session may stop): later laps count no jobs."""
        self._spark = None

    def timings(self) -> Timings:
        return Timings(laps=dict(self.laps), spark_jobs={
            **self.jobs, "total": sum(self.jobs.values())} if self._counted else None)


def execute(run: Run, spark: SparkSession | Callable[[], SparkSession],
            replays: int | None = None, with_report: bool = True) -> Result:
    """stage → replay → reconcile (→ report) in this process; returns the result.

    `spark` is a session, or a function that makes one (called after staging, so a source that
    cannot be read is found before Spark starts; the session it makes is stopped at the end).
    A failed step leaves an inconclusive result (and its report) and raises.
    """
    with exclusive(run):
        return _execute(run, spark, replays, with_report)


def _execute(run: Run, spark: SparkSession | Callable[[], SparkSession], replays: int | None,
             with_report: bool) -> Result:
    clock = Stopwatch()
    begin(run)
    made = None
    try:
        stage(run)
        clock.lap("stage")
        if callable(spark):
            with _guarded(run, "replay", "replay spark"):  # a Spark that cannot start
                made = spark = spark()
            clock.lap("spark_start")
        result = replay_and_reconcile(run, spark, replays, keep_replays(), clock)
    except CannotRun:
        raise
    except Exception:
        if with_report:
            report(run)  # owners and the CLI's user see why, not an older run's answer
        raise
    finally:
        if made is not None:
            made.stop()
    if with_report:
        report(run)
        clock.lap("report")
    run.folder.write(clock.timings())
    return result


# the steps of the repair DAG, whose run holds no window: each step holds it for itself
REPAIR_STEPS = ("repair_plan", "repair_deliver")


def spark_step(step: str, run: Run, replays: int | None = None, owner: str | None = None,
               remote: str | None = None, plan: str | None = None) -> str:
    """One Spark step under spark-submit (`kafka_recon/jobs/*.py`): the session spark-submit
    configured (or, with `remote`, a Spark Connect server's), the step, a one-line summary
    for the task's log. A repair step holds the window itself, for its own duration: the
    repair DAG claims no window while it waits for an owner's approval."""
    if step in REPAIR_STEPS:
        return _repair_step(step, run, remote, plan)
    with held(run, owner):
        return _spark_step(step, run, replays, remote)


def _repair_step(step: str, run: Run, remote: str | None, plan: str | None) -> str:
    import json

    from kafka_recon.spark.session import session

    if step == "repair_deliver" and not plan:
        raise UsageError("repair_deliver: --plan names the approved plan")
    spark = session(f"kafka-recon {step} {run.flow.name}", remote=remote)
    try:
        if step == "repair_plan":
            done = plan_repair(run, spark)
            return json.dumps({"plan": done.digest, "hops": [
                (h.hop, h.records, h.uncovered) for h in done.hops]})
        assert plan is not None
        sent = deliver_repair(run, spark, plan)
        return json.dumps({"plan": sent.plan_digest, "hops": [
            (h.hop, h.target, h.sent, h.already) for h in sent.hops]})
    finally:
        spark.stop()


def _spark_step(step: str, run: Run, replays: int | None, remote: str | None) -> str:
    import json

    from kafka_recon.spark.session import session

    spark = session(f"kafka-recon {step} {run.flow.name}", remote=remote)
    try:
        if step == "replay":
            out, _ = replay(run, spark, replays)
            return json.dumps({"replays": [(t.tier, r.group, r.count) for t in out.topics
                                           for r in t.replays]})
        if step == "reconcile":
            result = reconcile(run, spark)
        elif step == "replay_reconcile":
            clock = Stopwatch()
            result = replay_and_reconcile(run, spark, replays, keep_replays(), clock)
            run.folder.write(clock.timings())
        else:
            raise UsageError(f"no Spark step '{step}' (replay, reconcile, replay_reconcile)")
        return json.dumps({"status": result.status,
                           "findings": [(f.kind, f.hop, f.count) for f in result.findings]})
    finally:
        spark.stop()


def seed_history(flow: Flow, days: int, until: datetime | None = None) -> list[str]:
    """Count each tier's records per bucket over the `days` days of whole windows before
    `until` (default: the last closed window's end), without a replay, and keep them as the
    history its volume is judged by: a new flow is judged from its first week. A SQL tier is
    counted by its queries (one COUNT per bucket of an `ids` query), a topic by its offsets
    between the buckets' Kafka timestamps (an estimate: transaction markers count too); a
    table or Flume tier is counted only by a run. One line per tier says what was kept."""
    from kafka_recon.outputs import history
    from kafka_recon.sources.kafka_client import endpoint
    from kafka_recon.sources.sql import bucket_counts
    from kafka_recon.sources.topic import window_offsets

    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    now = until or datetime.now(UTC) - flow.closing
    end = epoch + ((now - epoch) // flow.window) * flow.window
    start = end - timedelta(days=days)
    said = []
    for point in flow.points:
        tier = point.tier
        counts: dict[datetime, int] = {}
        if isinstance(tier, SqlTier):
            how = "its " + ("ids query, a COUNT per bucket" if tier.ids else "counts query")
            w = start
            while w < end:
                counts |= {parse_instant(k, f"tier '{point.name}'"): n for k, n in
                           bucket_counts(tier, Window(w, w + flow.window), flow.bucket).items()}
                w += flow.window
        elif isinstance(tier, KafkaTier):
            how = "offsets between the buckets' Kafka timestamps, an estimate"
            ep, b = endpoint(tier), start
            while b < end:
                ranges = window_offsets(ep, tier.topic, Window.millis(b),
                                        Window.millis(b + flow.bucket))
                counts[b] = sum(r.end - r.start for r in ranges)
                b += flow.bucket
        else:
            said.append(f"{point.name}: not seeded: a {tier.type} tier is counted only by a "
                        "run")
            continue
        n = history.seed(flow.name, point.name, counts)
        said.append(f"{point.name}: {n} bucket(s) seeded from {start:%Y-%m-%d %H:%M} to "
                    f"{end:%Y-%m-%d %H:%M} UTC, {sum(counts.values()):,} records ({how})")
    return said
