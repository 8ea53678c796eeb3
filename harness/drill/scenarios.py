"""docs/design.md's loss scenario catalogue, each as settings, an act and the finding it must give.

An act starts the apps with the seed's settings and injects the fault when the cluster and the
ledgers show the state the fault needs (the leader really is the broker killed; the records
really are acknowledged by the leader alone; the offsets really are committed past what was
processed). What each act saw is kept as evidence in the matrix.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from harness.drill import ledger
from harness.drill.apps import upstream_rows
from harness.drill.faults import (
    alter_topic,
    leader_of,
    partition_state,
    wait_for,
    wait_isr,
    wait_leader_moved,
)
from harness.drill.runner import App, Ctx, Key, Scenario, Truth
from harness.drill.truth import chain_findings, expected_findings, sql_time

RATE = 500  # records/s: sending lasts seconds, so a fault lands in the middle of it


def _grown(app: App, event: str, by: int, timeout: float = 60) -> int:
    base = app.count(event)
    return int(wait_for(f"{by} more '{event}' in the {app.role}'s ledger",
                        lambda: (n := app.count(event)) >= base + by and n, timeout))


def _follower(ctx: Ctx, leader: int) -> int:
    state = partition_state(ctx.bootstrap, ctx.topic) or {}
    return next(r for r in state["replicas"] if r != leader)


def _kill_leader_after_pausing_a_follower(ctx: Ctx, producer: App, progress: str,
                                          shrink: bool, first: int = 500,
                                          after: int = 300) -> None:
    """Pause a follower (and, with `shrink`, wait until the ISR drops it), let `after` more
    records in that it never copies, SIGKILL the leader, resume the follower, wait for a new
    leader, restart the old one. With RF 2 the leader alone held those records; with RF 3
    and the ISR shrunk, the other follower did too."""
    if first:
        _grown(producer, progress, first)
    leader = leader_of(ctx.bootstrap, ctx.topic)
    follower = _follower(ctx, leader)
    ctx.cluster.pause(follower)
    ctx.note(f"follower {follower} paused (SIGSTOP) at {producer.count(progress)} {progress}")
    if shrink:
        isr = wait_isr(ctx.bootstrap, ctx.topic, 0, lambda isr: follower not in isr,
                       f"without {follower}")
        ctx.note(f"ISR shrank to {isr}")
    n = _grown(producer, progress, after)
    now = leader_of(ctx.bootstrap, ctx.topic)
    if now != leader:
        raise RuntimeError(f"the leader moved to {now} before the kill")
    ctx.cluster.kill(leader)
    ctx.note(f"leader {leader} (from metadata) SIGKILLed at {n} {progress}, "
             f"{after}+ of them sent after follower {follower} stopped copying")
    ctx.cluster.resume(follower)
    new = wait_leader_moved(ctx.bootstrap, ctx.topic, 0, leader, timeout=90)
    ctx.note(f"broker {new} elected leader")
    ctx.cluster.restart(leader)
    ctx.note(f"broker {leader} restarted")


def _lost_acked(ctx: Ctx, truth: Truth) -> str | None:
    lost = set(truth.upstream) - set(truth.topic)
    acked = set(ledger.ids(ctx.folder / "producer" / "ledger", "acked"))
    if not lost & acked:
        return "no acknowledged record was lost"
    ctx.note(f"{len(lost & acked)} of the {len(lost)} lost records had been acknowledged")
    return None


# ------------------------------------------------------------------ write side
def s1(ctx: Ctx) -> None:
    p = ctx.producer(config={"acks": "0", "enable.idempotence": False}, rate=RATE)
    _kill_leader_after_pausing_a_follower(ctx, p, "sent", shrink=False)
    c = ctx.consumer()
    p.wait()
    ctx.drain(c)


def s2(ctx: Ctx) -> None:
    p = ctx.producer(config={"acks": "1", "enable.idempotence": False}, rate=RATE)
    _kill_leader_after_pausing_a_follower(ctx, p, "acked", shrink=True)
    c = ctx.consumer()
    p.wait()
    ctx.drain(c)


def s3(ctx: Ctx) -> None:
    timeout_ms = 3000
    p = ctx.producer(config={"acks": "1", "enable.idempotence": False,
                             "delivery.timeout.ms": timeout_ms}, callback=False, rate=RATE)
    _grown(p, "sent", 500)
    leader = leader_of(ctx.bootstrap, ctx.topic)
    ctx.cluster.kill(leader)
    down = time.monotonic()
    ctx.note(f"the only replica, broker {leader} (from metadata), SIGKILLed at "
             f"{p.count('sent')} sent")
    # records queued for the dead partition expire after delivery.timeout.ms; no callback
    # means nobody hears of it
    _grown(p, "sent", 2 * RATE)
    wait_for("the delivery timeout to pass while the partition is offline",
             lambda: time.monotonic() - down > timeout_ms / 1000 + 1, 30)
    ctx.cluster.restart(leader)
    ctx.note(f"broker {leader} restarted {time.monotonic() - down:.1f}s later; the producer "
             f"registered no delivery callback")
    c = ctx.consumer()
    p.wait()
    ctx.drain(c)


OVERSIZE = {500: 20_000, 1000: 20_000, 1500: 20_000}


def s4(ctx: Ctx) -> None:
    # batches smaller than the topic's limit: only a record that is itself too big is refused
    p = ctx.producer(config={"acks": "all", "enable.idempotence": False, "batch.size": 4096},
                     pad={str(k): v for k, v in OVERSIZE.items() if k <= 2000})
    c = ctx.consumer()
    p.wait()
    failed = ledger.read(p.ledger, "failed")
    ctx.note(f"delivery reports: {len(failed)} failed "
             f"({', '.join(sorted({r['error'] for r in failed})) or 'none'})")
    ctx.drain(c)


def s4_bite(ctx: Ctx, truth: Truth) -> str | None:
    lost = set(truth.upstream) - set(truth.topic)
    big = {k for k in OVERSIZE if k in truth.upstream}
    if not big <= lost:
        return "an oversized record reached the topic"
    return None


# ------------------------------------------------------------------ consume side
def _broker_committed(ctx: Ctx) -> dict[int, int]:
    """The group's committed offsets as the broker holds them (not as the app believes)."""
    from kafka_recon.sources.kafka_client import KafkaEndpoint
    from kafka_recon.sources.topic import check_topic, committed_offsets

    ep = KafkaEndpoint(ctx.bootstrap)
    parts = check_topic(ep, ctx.topic)
    got = committed_offsets(ep, ctx.topic, [ctx.group], parts)[ctx.group]
    return {p: o for p, o in got.items() if o >= 0}


def _committed_past_processed(ctx: Ctx, app: App) -> bool:
    """Offsets committed for records the app has fetched but not processed yet."""
    committed = _broker_committed(ctx)
    done = ledger.last_offsets(app.ledger)
    return any(off > done.get(p, -1) + 1 for p, off in committed.items())


def _processed_past_committed(ctx: Ctx, app: App) -> bool:
    """Records processed after the last commit: a crash now replays them."""
    committed = _broker_committed(ctx)
    done = ledger.last_offsets(app.ledger)
    return bool(committed) and any(off >= committed.get(p, 0) + 50 for p, off in done.items())


def _crash_consumer(ctx: Ctx, commit: str, when: str) -> None:
    p = ctx.producer()
    assert p.wait() == 0
    spec: dict[str, Any] = {"commit": commit, "batch": 200, "process_ms": 4}
    if commit == "auto":
        spec["config"] = {"auto.commit.interval.ms": 100}
    c = ctx.consumer(**spec)
    ready = _committed_past_processed if when == "committed" else _processed_past_committed
    wait_for(f"the consumer's ledger to show offsets {when} ahead",
             lambda: c.count("processed") >= 200 and ready(ctx, c), 60)
    c.kill()
    ctx.note(f"consumer SIGKILLed mid-batch with {c.count('processed')} processed and "
             f"{c.count('committed')} commits in its ledger ({when} ahead)")
    c.start()  # the same app, restarted: it resumes from the group's committed offsets
    ctx.drain(c)


def s5(ctx: Ctx) -> None:
    _crash_consumer(ctx, "auto", "committed")


def s6(ctx: Ctx) -> None:
    _crash_consumer(ctx, "before", "committed")


def s8(ctx: Ctx) -> None:
    _crash_consumer(ctx, "after", "processed")


def s7(ctx: Ctx) -> None:
    # acks=all waits for a paused follower until the ISR shrinks (5 s); the client gives up on
    # each request after 1.5 s and, without idempotence, sends it again: acks lost, records not
    p = ctx.producer(config={"acks": "all", "enable.idempotence": False, "retries": 10,
                             "request.timeout.ms": 1500, "delivery.timeout.ms": 120000},
                     rate=RATE)
    _grown(p, "acked", 500)
    leader = leader_of(ctx.bootstrap, ctx.topic)
    follower = _follower(ctx, leader)
    ctx.cluster.pause(follower)
    ctx.note(f"follower {follower} paused at {p.count('acked')} acked; requests wait for it")
    isr = wait_isr(ctx.bootstrap, ctx.topic, 0, lambda isr: follower not in isr,
                   f"without {follower}")
    ctx.note(f"ISR shrank to {isr}: the waiting requests complete, after the client retried")
    ctx.cluster.resume(follower)
    c = ctx.consumer()
    p.wait()
    ctx.drain(c)


def s9(ctx: Ctx) -> None:
    from confluent_kafka import Producer

    from harness.drill.faults import log_start

    c = ctx.consumer(process_ms=10)  # a slow consumer: 100 records/s
    p = ctx.producer()
    wait_for("the consumer to process its first records", lambda: c.count("processed") >= 300,
             60)
    c.kill()
    ctx.note(f"consumer SIGKILLed after {c.count('processed')} processed: it stays down")
    assert p.wait() == 0
    # the segment holding the window must be closed before retention can delete it: a record
    # from outside the window (a heartbeat) rolls it once segment.ms has passed
    time.sleep(2.5)
    hb = Producer({"bootstrap.servers": ctx.bootstrap})
    hb.produce(ctx.topic, key="0", value=json.dumps({"id": 0, "ts": "2000-01-01 00:00:00"}))
    hb.flush(30)
    alter_topic(ctx.bootstrap, ctx.topic, {"retention.ms": "1000"})
    ctx.note("retention.ms shortened to 1 s")
    committed = max((int(r["offset"]) for r in ledger.read(c.ledger, "committed")), default=0)
    low = wait_for("retention to delete past the group's committed offset",
                   lambda: (n := log_start(ctx.bootstrap, ctx.topic, 0)) > committed and n, 90)
    alter_topic(ctx.bootstrap, ctx.topic, {"retention.ms": "604800000"})
    ctx.note(f"log start moved to {low}, the group had committed {committed}: "
             f"{low - committed} offsets deleted unread; retention restored to 7 days")


def s9_truth(ctx: Ctx, truth: Truth) -> dict[str, dict[Key, dict[str, Any]]]:
    """Deleted before consumed: acknowledged by Kafka, never processed (the apps' ledgers)."""
    acked = set(ledger.ids(ctx.folder / "producer" / "ledger", "acked"))
    # what the sink holds counts as consumed too: a consumer SIGKILLed between its insert and
    # its ledger line leaves one row the ledger never names
    processed = set(ledger.ids(ctx.folder / "sink" / "ledger", "processed")) \
        | set(truth.sinks["sink"])
    still = set(truth.topic)
    gone = (acked & set(truth.upstream)) - processed - still
    found = {("loss", "consume", "topic->sink (retention)"): {"ids": gone, "count": len(gone)}}
    unread_left = still - set(truth.sinks["sink"])
    if unread_left:
        found[("loss", "consume", "topic->sink")] = {"ids": unread_left,
                                                     "count": len(unread_left)}
    return {"sink": found if gone else {}}


# ------------------------------------------------------------------ Flume (S10)
class _FlumeUnderWatch:
    """The agent and a thread snapshotting its counters every second, as the scheduled
    `kafka-recon snapshot` would, into the store the reconciliation reads."""

    def __init__(self, agent: Any, store: Path) -> None:
        from kafka_recon.config import FlumeTier

        self.agent, self.store = agent, store
        self.tier = FlumeTier(name="collector", type="flume", metrics_url=agent.metrics_url,
                              source="r1", sink="k1")
        self.taken = 0
        self.accepted = 0  # as of the last snapshot
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        from kafka_recon.sources.flume import FlumeError, read_tier
        from kafka_recon.stores.snapshots import connect, keep_flume
        from kafka_recon.window import iso_us

        eng = connect(self.store)
        while not self._stop.is_set():
            try:
                now = datetime.now(UTC)
                snap, raw = read_tier(self.tier, now)
                keep_flume(eng, "drill", self.tier.name, iso_us(now), snap, raw)
                self.taken += 1
                self.accepted = snap.source_accepted
            except FlumeError:
                pass  # the agent is down: no snapshot, as in production
            self._stop.wait(1.0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.agent.stop()


def _flume_tier(ctx: Ctx) -> str:
    return (f"      - name: collector\n        type: flume\n"
            f"        metrics_url: \"{ctx.flume.agent.metrics_url}\"\n"
            f"        source: r1\n        sink: k1\n")


def _flume_counts(agent: Any) -> tuple[int, int, int]:
    m = agent.metrics()
    return (int(m["SOURCE.r1"]["EventAcceptedCount"]), int(m["SINK.k1"]["EventDrainSuccessCount"]),
            int(m["CHANNEL.c1"]["ChannelSize"]))


def s10(ctx: Ctx) -> None:
    from harness.drill.runner import _exec
    from harness.drill.truth import sql_time
    from harness.services.flume import FlumeAgent

    agent = FlumeAgent(ctx.folder / "flume", ctx.bootstrap, ctx.topic).start()
    store = ctx.folder / "snapshots.db"  # the attempt's store, which staging reads
    ctx.flume = _FlumeUnderWatch(agent, store)
    wait_for("a first snapshot of the agent's counters", lambda: ctx.flume.taken, 30)
    # the window starts once the agent is watched; the rows are created inside it
    begins = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
    ctx.window_start, ctx.bucket = begins, "5m"
    wait_for("the window to start", lambda: datetime.now(UTC) >= begins, 5)
    _exec(ctx.upstream, "UPDATE src SET ts = ?", [(sql_time(datetime.now(UTC)),)])
    c = ctx.consumer()
    rows = _upstream(ctx)
    first, second = rows[: len(rows) // 2], rows[len(rows) // 2:]
    book = ledger.Ledger(ctx.folder / "flume-client" / "ledger")

    def post(batch: list[tuple[int, str]]) -> None:
        for i in range(0, len(batch), 100):
            chunk = batch[i:i + 100]
            agent.post([{"headers": {"key": str(r)},
                         "body": json.dumps({"id": r, "ts": ts})}
                        for r, ts in chunk])
            for r, _ in chunk:
                book.write("sent", r)

    post(first)
    wait_for("the agent to drain the first half into Kafka",
             lambda: _flume_counts(agent)[1] >= len(first), 60)
    leader = leader_of(ctx.bootstrap, ctx.topic)
    follower = _follower(ctx, leader)
    ctx.cluster.kill(follower)
    isr = wait_isr(ctx.bootstrap, ctx.topic, 0, lambda isr: follower not in isr,
                   f"without {follower}")
    ctx.note(f"{len(first)} events drained; broker {follower} killed, ISR {isr} is below "
             f"the topic's min.insync.replicas=3: the Kafka sink cannot deliver")
    post(second)
    acc, drained, size = wait_for(
        "the second half to sit in the memory channel",
        lambda: (n := _flume_counts(agent))[0] >= len(rows) and n, 60)
    # as in production, the events sat in the channel long enough for a scheduled snapshot
    # to count them accepted; what an agent accepts after its last snapshot dies uncounted
    wait_for("a snapshot counting every event accepted",
             lambda: ctx.flume.accepted >= len(rows), 30)
    agent.kill()
    ctx.note(f"agent SIGKILLed with {acc} accepted, {drained} drained, {size} in the memory "
             f"channel (plus a batch taken by the stalled sink)")
    ctx.cluster.restart(follower)
    agent.start()
    ctx.note("broker and agent restarted; the new agent's counters start from zero")
    ctx.drain(c)
    book.close()


def _upstream(ctx: Ctx) -> list[tuple[int, str]]:
    return upstream_rows(str(ctx.upstream))


# ------------------------------------------------------------------ controls and others
def s11(ctx: Ctx) -> None:
    p = ctx.producer(config={"acks": "all", "enable.idempotence": True,
                             "transactional.id": f"tx-{ctx.topic}"},
                     transactions={"batch": 100, "abort_every": 3})
    c = ctx.consumer(config={"isolation.level": "read_committed"})
    assert p.wait() == 0
    ctx.note("every third transaction aborted and its records sent again in a new one")
    ctx.drain(c)


def s12(ctx: Ctx) -> None:
    p = ctx.producer(rate=RATE)
    _grown(p, "acked", 1500)
    # the consumer starts behind, so its batches are full when it is killed
    c = ctx.consumer(commit="after", upsert=True, batch=200, process_ms=2)
    wait_for("the consumer to process past its last commit",
             lambda: c.count("processed") >= 200 and _processed_past_committed(ctx, c), 60)
    c.kill()
    ctx.note(f"consumer SIGKILLed mid-batch at {c.count('processed')} processed, past its "
             "last commit; restarted")
    c.start()
    # the faults of S1/S2, on the safe topic: the ISR keeps the leader and one follower
    _kill_leader_after_pausing_a_follower(ctx, p, "acked", shrink=True, first=0, after=200)
    assert p.wait() == 0
    ctx.drain(c)


def _sent_after_the_end(ctx: Ctx, after_s: int) -> None:
    """The last 20 upstream rows made a second before the window's end (12 s from now, grace
    20 s), held by the producer until `after_s` seconds after it, then consumed as usual."""
    from datetime import UTC, datetime, timedelta

    from harness.drill.runner import _exec
    from harness.drill.truth import sql_time

    end = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=12)
    last = _upstream(ctx)[-1][0]
    late = list(range(last - 19, last + 1))
    _exec(ctx.upstream, "UPDATE src SET ts = ? WHERE id >= ?",
          [(sql_time(end - timedelta(seconds=1)), late[0])])
    ctx.window_end, ctx.grace_s = end, 20
    p = ctx.producer(hold={"ids": late,
                           "until": (end + timedelta(seconds=after_s)).timestamp()})
    c = ctx.consumer()
    assert p.wait() == 0
    ctx.note(f"{len(late)} records created a second before the window end, sent {after_s} s "
             f"after it (grace {ctx.grace_s} s)"
             + ("; the consumer then wrote them to the sink" if after_s > ctx.grace_s else ""))
    ctx.drain(c)


def s13(ctx: Ctx) -> None:
    _sent_after_the_end(ctx, 3)  # inside grace: late, not lost


def s23(ctx: Ctx) -> None:
    # 8 s after the grace: inside the flow's 5-minute disorder margin, which the replay reads
    # past the close
    _sent_after_the_end(ctx, 28)


def s14(ctx: Ctx) -> None:
    from harness.drill.runner import _exec

    p = ctx.producer()
    c = ctx.consumer()
    assert p.wait() == 0
    ctx.drain(c)
    ts = max(t for _, t in _upstream(ctx))
    _exec(ctx.sinks["sink"], "INSERT INTO dst VALUES (?, ?)",
          [(900_000 + i, ts) for i in range(1, 8)])
    ctx.note("a backfill script wrote 7 rows straight into the sink table")


def s15(ctx: Ctx) -> None:
    a = ctx.consumer(sink="sink_a")
    b = ctx.consumer(sink="sink_b")
    wait_for("both apps to hold partitions of the shared group",
             lambda: a.state().get("assigned") and b.state().get("assigned"), 60)
    p = ctx.producer()
    assert p.wait() == 0
    ctx.drain(a, b)
    ctx.note(f"one group.id, two apps: sink_a took partitions "
             f"{a.state().get('assigned', '?')}, sink_b the others")


def s15_bite(ctx: Ctx, truth: Truth) -> str | None:
    if any(not c for c in truth.sinks.values()):
        return "one app got every partition: the group was not shared"
    return None


# ------------------------------------------------------------------ through a mirror
def _mirror_consumer(ctx: Ctx) -> App:
    """The sink's loader reads the mirror's copy on the aggregate cluster."""
    assert ctx.target is not None
    return ctx.consumer(bootstrap=ctx.target.bootstrap, topic=ctx.mirrored)


def _mirrored_all(ctx: Ctx, mm2: Any, records: int) -> int:
    from harness.services.mirror import wait_mirrored

    assert ctx.target is not None
    return wait_mirrored(ctx.target.bootstrap, ctx.mirrored, records, mirror=mm2)


def s17(ctx: Ctx) -> None:
    # the mirror commits its source offsets every 10 minutes: killed, it copies again all it
    # had copied (MirrorMaker 2 is at-least-once)
    mm2 = ctx.mirror(**{"offset.flush.interval.ms": 600_000})
    _mirrored_all(ctx, mm2, 0)  # running: it has made the mirrored topic
    p = ctx.producer(rate=RATE)
    _mirrored_all(ctx, mm2, 500)
    mm2.kill()
    held = _mirrored_all(ctx, mm2, 0)
    ctx.note(f"MirrorMaker 2 SIGKILLed with {held} records copied and no source offset "
             f"committed, the producer {'still sending' if p.running() else 'done'}")
    assert p.wait() == 0
    mm2.start()
    total = _mirrored_all(ctx, mm2, held + len(_upstream(ctx)))
    ctx.note(f"restarted: the mirrored topic holds {total} records for "
             f"{len(_upstream(ctx))} written")
    ctx.drain(_mirror_consumer(ctx))


def s19(ctx: Ctx) -> None:
    # MirrorMaker 2 left to its defaults but for what a one-broker target needs, the
    # producer and the loader safe: nothing lost, nothing copied twice
    mm2 = ctx.mirror()
    p = ctx.producer(rate=RATE)
    assert p.wait() == 0
    _mirrored_all(ctx, mm2, len(_upstream(ctx)))
    ctx.drain(_mirror_consumer(ctx))


def s16(ctx: Ctx) -> None:
    from confluent_kafka import Producer

    from harness.drill.faults import log_start, watermarks

    # the mirror commits its progress every second, so its store says how far it got
    mm2 = ctx.mirror(**{"offset.flush.interval.ms": 1000})
    _mirrored_all(ctx, mm2, 0)  # running: it has made the mirrored topic
    # slowly (60 s of sending): the mirror's first progress commit lands while it sends
    p = ctx.producer(rate=100)
    _mirrored_all(ctx, mm2, 500)
    copied = wait_for("the mirror to commit its progress", lambda: ctx.mirror_progress(), 60)
    mm2.pause()
    ctx.note(f"MirrorMaker 2 paused (SIGSTOP), its progress committed at {copied}, the "
             f"producer {'still sending' if p.running() else 'done'}")
    assert p.wait() == 0
    # the segment holding the window must be closed before retention can delete it: a record
    # from outside the window rolls it once segment.ms has passed (as in S9)
    time.sleep(2.5)
    hb = Producer({"bootstrap.servers": ctx.bootstrap})
    hb.produce(ctx.topic, key="0", value=json.dumps({"id": 0, "ts": "2000-01-01 00:00:00"}))
    hb.flush(30)
    committed = ctx.mirror_progress().get(0, 0)
    _, end = watermarks(ctx.bootstrap, ctx.topic, 0)
    alter_topic(ctx.bootstrap, ctx.topic, {"retention.ms": "1000"})
    # every closed segment deleted, only the heartbeat's left: past what the paused mirror
    # had read, whatever it had committed
    low = wait_for("retention to delete every closed segment",
                   lambda: (n := log_start(ctx.bootstrap, ctx.topic, 0)) >= end - 1 and n, 90)
    alter_topic(ctx.bootstrap, ctx.topic, {"retention.ms": "604800000"})
    ctx.note(f"log start moved to {low}, the mirror had copied up to {committed}: "
             f"{low - committed} offsets deleted uncopied; retention restored to 7 days")
    mm2.resume()
    # one more record outside the window: copied, it proves the mirror went on past the gap
    hb.produce(ctx.topic, key="0", value=json.dumps({"id": 0, "ts": "2000-01-01 00:00:01"}))
    hb.flush(30)
    last = wait_for("the resumed mirror to copy past the deleted offsets",
                    lambda: (n := ctx.mirror_progress().get(0, 0)) > low and n, 120)
    ctx.note(f"resumed: the mirror jumped to the log start and copied up to offset {last - 1}")
    ctx.drain(_mirror_consumer(ctx))


def s16_truth(ctx: Ctx, truth: Truth) -> dict[str, dict[Key, dict[str, Any]]]:
    """Deleted before copied: acknowledged by the source cluster, never in the mirror's copy
    (the producer's ledger and a plain read of both topics)."""
    acked = set(ledger.ids(ctx.folder / "producer" / "ledger", "acked"))
    mirrored = truth.of("mirrored")
    gone = (acked & set(truth.upstream)) - set(mirrored) - set(truth.topic)
    found: dict[Key, dict[str, Any]] = {}
    if gone:
        found[("loss", "replication", "topic->mirrored (retention)")] = {
            "ids": gone, "count": len(gone)}
    # beyond the fault, what the tiers really hold: a mirror resumed after its pause may send
    # again what it sent before its last progress commit (the source topic held each record
    # once: its producer is idempotent), and the loader's hop is judged as any chain's
    copies = {i: n - 1 for i, n in mirrored.items() if n > 1}
    if copies:
        found[("duplicate", "replication", "topic->mirrored")] = {
            "ids": set(copies), "count": sum(copies.values())}
    found.update(chain_findings([("mirrored", mirrored), ("sink", truth.sinks["sink"])],
                                ["consume"]))
    return {"sink": found}


def s18(ctx: Ctx) -> None:
    p = ctx.producer()
    assert p.wait() == 0
    proc = ctx.processor(commit="before", batch=200, process_ms=4)
    wait_for("the processor's ledger to show offsets committed ahead",
             lambda: proc.count("processed") >= 200 and _committed_past_processed(ctx, proc),
             60)
    proc.kill()
    ctx.note(f"processor SIGKILLed mid-batch with {proc.count('processed')} records produced "
             f"on and {proc.count('committed')} commits in its ledger (committed ahead)")
    proc.start()  # restarted: it resumes from its group's commits, past the batch it lost
    ctx.drain(proc)
    ctx.drain(ctx.consumer(topic=ctx.processed, group=f"loader-{ctx.processed}"))


def s17_bite(ctx: Ctx, truth: Truth) -> str | None:
    if max(truth.of("mirrored").values(), default=0) < 2:
        return "the restarted mirror copied nothing twice"
    return None


# ------------------------------------------------------------------ streaming writers (S21)
def _streamed(ctx: Ctx, job: App, expected: int, timeout: float = 240) -> None:
    """Wait until every record has reached the job's table, then stop the job."""
    from datetime import UTC, datetime, timedelta

    from harness.drill.truth import table_ids

    def done() -> bool:
        far = datetime.now(UTC) + timedelta(days=1)
        return len(table_ids(Path(ctx.sinks["sink"]), datetime(2000, 1, 1, tzinfo=UTC),
                             far)) >= expected
    wait_for("the streaming job to write every record into its table", done, timeout)
    job.stop(30)


def _checkpoint_caught_up(ctx: Ctx, checkpoint: Path) -> bool:
    """The streaming query's last committed batch ends at the topic's end (its checkpoint's
    offsets log: a batch's offsets, then its commit)."""
    from harness.drill.faults import watermarks

    commits = [int(f.name) for f in (checkpoint / "commits").glob("[0-9]*")]
    if not commits:
        return False
    last = (checkpoint / "offsets" / str(max(commits))).read_text().splitlines()[-1]
    done = {int(p): int(o) for p, o in json.loads(last).get(ctx.topic, {}).items()}
    parts = len(done) or 1
    return all(done.get(p, -1) >= watermarks(ctx.bootstrap, ctx.topic, p)[1]
               for p in range(parts))


def s20(ctx: Ctx) -> None:
    import shutil

    p = ctx.producer(rate=200)  # about a minute of sending: the restart lands in the middle
    job = ctx.streaming(format="delta", per_batch=300)
    checkpoint = Path(job.spec["checkpoint"])
    wait_for("the streaming job to commit its first batches",
             lambda: len(list((checkpoint / "commits").glob("[0-9]*"))) >= 3, 240)
    job.kill()
    shutil.rmtree(checkpoint)
    ctx.note(f"streaming job SIGKILLed with {p.count('acked')} records acked; its checkpoint "
             "deleted")
    time.sleep(3)  # the producer goes on: these records are past the old query's progress
    job.spec["starting"] = "latest"
    job.start()
    ctx.note("restarted without a checkpoint, startingOffsets=latest")
    assert p.wait() == 0
    wait_for("the new query to catch up with the topic's end",
             lambda: _checkpoint_caught_up(ctx, checkpoint), 240)
    job.stop(30)


def s21(ctx: Ctx) -> None:
    p = ctx.producer()
    assert p.wait() == 0
    acked = p.count("acked")
    # batches of 300 per trigger: batch 2 is written, then the job holds before its
    # checkpoint commits it, and dies there
    job = ctx.streaming(per_batch=300, hold=2)
    held = Path(job.spec["marker"])
    wait_for("the streaming job to write batch 2 and hold before committing it",
             held.exists, 240)
    job.kill()
    ctx.note("streaming job SIGKILLed after writing batch 2's Parquet files, before its "
             "checkpoint committed the batch")
    job.start()  # the same checkpoint: batch 2's offsets are run again
    _streamed(ctx, job, acked)
    ctx.note(f"restarted on its checkpoint: every one of {acked} records in the table")


# ------------------------------------------------------------------ MariaDB upstream (S22)
def s22(ctx: Ctx) -> None:
    from datetime import UTC, datetime

    from confluent_kafka import Producer
    from sqlalchemy import create_engine, text

    from harness.drill.runner import SAFE_PRODUCER
    from kafka_recon.sources.connections import resolve

    # the application publishes each row inside the transaction that writes it (the outbox
    # done wrong): six batches of 100, the fourth rolled back after it was sent
    engine = create_engine(resolve(ctx.upstream_url))
    p = Producer({"bootstrap.servers": ctx.bootstrap, **SAFE_PRODUCER})
    loader = ctx.consumer()
    rolled: list[int] = []
    try:
        for batch in range(6):
            with engine.connect() as con:
                tx = con.begin()
                at = sql_time(datetime.now(UTC))
                ids = [int(con.execute(text("INSERT INTO src (ts) VALUES (:t)"),
                                       {"t": at}).lastrowid) for _ in range(100)]
                for i in ids:
                    p.produce(ctx.topic, key=str(i), value=json.dumps({"id": i, "ts": at}))
                assert p.flush(30) == 0
                if batch == 3:
                    tx.rollback()
                    rolled += ids
                else:
                    tx.commit()
    finally:
        engine.dispose()
    ctx.note(f"ids {rolled[0]}-{rolled[-1]} published, then their transaction rolled back; "
             "the batches after it committed")
    ctx.drain(loader)


# ------------------------------------------------------------------ exactly-once producers
def s24(ctx: Ctx) -> None:
    # a transactional application dies mid-transaction; its transaction.timeout.ms (15 min)
    # keeps the transaction open long after the window closes, while another application
    # commits the rest on the same partition
    eos = {"acks": "all", "enable.idempotence": True}
    dying = ctx.producer(config={**eos, "transactional.id": f"dying-{ctx.topic}",
                                 "transaction.timeout.ms": 900_000},
                         transactions={"batch": 100, "hang_after": 5})
    wait_for("the dying app's open transaction", lambda: dying.count("hanging") > 0, 60)
    dying.kill()
    [(first, last)] = [(int(r["first"]), int(r["last"])) for r in
                       ledger.read(ctx.folder / "producer" / "ledger", "hanging")]
    ctx.note(f"transactional app SIGKILLed with ids {first}-{last} sent in a transaction it "
             "never ended (transaction.timeout.ms 900000)")
    rest = ctx.producer(config={**eos, "transactional.id": f"rest-{ctx.topic}"},
                        transactions={"batch": 100}, after=last)
    assert rest.wait() == 0
    ctx.note(f"another app committed ids {last + 1}- after it, on the same partition")


def s24_truth(ctx: Ctx, truth: Truth) -> dict[str, dict[Key, dict[str, Any]]]:
    """While the transaction is open nothing after its first offset can be read by any
    read_committed reader: the window cannot be judged, and a perfect detector says so."""
    return {sink: {} for sink in ctx.sinks}


def s24_bite(ctx: Ctx, truth: Truth) -> str | None:
    from kafka_recon.cluster.transactions import stable_offsets
    from kafka_recon.sources.kafka_client import KafkaEndpoint

    offsets = stable_offsets(KafkaEndpoint(ctx.bootstrap), ctx.topic, [0]).values()
    if any(lso < high for lso, high in offsets):
        return None
    return "the transaction was no longer open when the window was run"


LAGGING = 20  # the processor's records written after the close


def s25(ctx: Ctx) -> None:
    from datetime import UTC, datetime, timedelta

    from confluent_kafka import Producer

    from harness.drill.apps import row_millis
    from harness.drill.runner import SAFE_PRODUCER

    # an exactly-once processor stamps each record with its event time and commits when it
    # checkpoints, every 30 s here: longer than the flow's 5 s disorder margin and 5 s grace.
    # Its last records are processed late, after another app's records of the next window
    # (stamped after the close plus the margin); the checkpoint commits them all
    now = datetime.now(UTC).replace(microsecond=0)
    end = now + timedelta(seconds=12)
    ctx.window_end, ctx.grace_s, ctx.disorder_s = end, 5, 5
    rows = _upstream(ctx)
    loader = ctx.consumer(config={"isolation.level": "read_committed"})
    proc = Producer({"bootstrap.servers": ctx.bootstrap, **SAFE_PRODUCER,
                     "transactional.id": f"processor-{ctx.topic}",
                     "transaction.timeout.ms": 120_000})
    other = Producer({"bootstrap.servers": ctx.bootstrap, **SAFE_PRODUCER})
    proc.init_transactions(30)
    proc.begin_transaction()

    def send(p: Any, batch: list[tuple[int, str]], stamp: bool) -> None:
        for i, ts in batch:
            kw = {"timestamp": row_millis(ts)} if stamp else {}
            p.produce(ctx.topic, key=str(i), value=json.dumps({"id": i, "ts": ts}), **kw)
        assert p.flush(30) == 0

    send(proc, rows[:-LAGGING], True)
    past = end + timedelta(seconds=ctx.grace_s + ctx.disorder_s + 2)
    time.sleep(max(0.0, (past - datetime.now(UTC)).total_seconds()))
    next_ts = sql_time(datetime.now(UTC))
    send(other, [(900_000 + i, next_ts) for i in range(5)], False)
    send(proc, rows[-LAGGING:], True)
    proc.commit_transaction(30)
    ctx.note(f"the processor's transaction, open from before the window's end, committed "
             f"{(datetime.now(UTC) - end).total_seconds():.0f} s after it; its last "
             f"{LAGGING} records written after the next window's first")
    ctx.drain(loader)


def s25_truth(ctx: Ctx, truth: Truth) -> dict[str, dict[Key, dict[str, Any]]]:
    """The processor's last records were written after the window closed (the act waited
    for it before sending them): lost by the window's rule, whatever they are stamped."""
    from collections import Counter

    late = set(sorted(truth.upstream)[-LAGGING:])
    written = Truth(truth.upstream, Counter({i: n for i, n in truth.topic.items()
                                             if i not in late}), truth.late, truth.sinks)
    return expected_findings(written, "db->topic")


SCENARIOS: dict[str, Scenario] = {s.id: s for s in [
    Scenario("S1", "producer acks=0, leader killed and restarted while sending", "000, 001, 002",
             [("loss", "write", "db->topic")], s1, replication=2,
             causes=("lagging_replica_elected",)),
    Scenario("S2", "acks=1, ISR shrank to the leader, leader killed, unclean election",
             "000-004", [("loss", "write", "db->topic")], s2, replication=2, rows=8000,
             causes=("lagging_replica_elected",),
             topic_config={"unclean.leader.election.enable": "true"}, bite=_lost_acked,
             repair=True),
    Scenario("S3", "fire-and-forget send, partition offline past delivery.timeout.ms",
             "000, 001", [("loss", "write", "db->topic")], s3, replication=1,
             causes=("partition_offline",)),
    Scenario("S4", "record larger than the topic's max.message.bytes", "000, 004",
             [("loss", "write", "db->topic")], s4, topic_config={"max.message.bytes": "8192"},
             causes=("record_rejected",),
             bite=s4_bite),
    Scenario("S5", "enable.auto.commit=true, consumer killed mid-batch", "000-004",
             [("loss", "consume", "topic->{sink}")], s5, partitions=2,
             causes=("commit_ahead_of_processing",), repair=True),
    Scenario("S6", "commit before processing, consumer killed mid-batch", "000",
             [("loss", "consume", "topic->{sink}")], s6, partitions=2,
             causes=("commit_ahead_of_processing",)),
    Scenario("S7", "retries without idempotence, acks lost to request timeouts", "000, 003",
             [("duplicate", "write", "db->topic")], s7, rows=6000,
             causes=("retries_without_idempotence",),
             topic_config={"min.insync.replicas": "2"}),
    Scenario("S8", "processed, killed before commit, reprocessed", "000, 004",
             [("duplicate", "consume", "topic->{sink}")], s8, partitions=2,
             causes=("redelivery_after_crash",)),
    Scenario("S9", "retention shortened while the consumer is down", "004",
             [("loss", "consume", "topic->{sink} (retention)")], s9, status="inconclusive",
             causes=("retention_deleted_unread",),
             topic_config={"segment.ms": "2000"}, truth=s9_truth),
    Scenario("S10", "Flume agent killed with events in its memory channel", "004",
             [("loss", "write", "collector.source->collector.sink")], s10,
             causes=("flume_channel_lost",),
             topic_config={"min.insync.replicas": "3"},
             write_hop="collector.source->collector.sink", extra_tiers=_flume_tier),
    Scenario("S11", "transactions, every third aborted, read_committed", "003", [], s11,
             partitions=2, status="ok"),
    Scenario("S12", "safe config under a paused follower, a killed leader and a killed "
             "consumer", "000-004", [], s12, status="ok", rows=10000,
             topic_config={"min.insync.replicas": "2",
                           "unclean.leader.election.enable": "false"}),
    Scenario("S13", "records created near the window end, arriving inside grace", "004",
             [("late", "write", "db->topic")], s13, status="ok", causes=(None,)),
    Scenario("S14", "rows written into the sink by someone else", "004",
             [("unexpected", "consume", "topic->{sink}")], s14,
             causes=("written_by_someone_else",)),
    Scenario("S15", "two applications sharing one group.id, two sinks", "004",
             [("loss", "consume", "topic->{sink}")], s15, partitions=4,
             causes=("partition_not_consumed",),
             sinks=("sink_a", "sink_b"), bite=s15_bite),
    Scenario("S16", "MirrorMaker 2 paused while retention deletes on the source cluster",
             "003, 004", [("loss", "replication", "topic->mirrored (retention)")], s16,
             mirror=True, status="inconclusive", causes=("retention_deleted_unread",),
             rows=6000,
             topic_config={"segment.ms": "2000"}, truth=s16_truth),
    Scenario("S17", "MirrorMaker 2 killed before its offset commit and restarted mid-stream",
             "004", [("duplicate", "replication", "topic->mirrored")], s17, mirror=True, rows=6000,
             causes=("resent_after_restart",), bite=s17_bite),
    Scenario("S18", "a processor that commits its input before producing its output, killed",
             "000", [("loss", "process", "topic->processed")], s18, processor=True,
             partitions=2, causes=("commit_ahead_of_processing",)),
    Scenario("S19", "a mirrored flow under safe settings: MirrorMaker 2 and a safe loader",
             "000-004", [], s19, status="ok", mirror=True),
    Scenario("S20", "a streaming job writing a Delta table restarted without its checkpoint, "
             "from the latest offsets", "004",
             [("loss", "consume", "topic->{sink}")], s20, partitions=2, rows=12000,
             sink_format="delta", causes=("checkpoint_reset",)),
    Scenario("S21", "a streaming job writing Parquet with foreachBatch killed between its "
             "write and its checkpoint's commit", "000, 003",
             [("duplicate", "consume", "topic->{sink}")], s21, partitions=2,
             sink_format="parquet", causes=("replayed_micro_batch",)),
    Scenario("S22", "a MariaDB upstream whose application publishes inside its transaction, "
             "one batch rolled back after it was sent", "004",
             [("unexpected", "write", "db->topic")], s22, partitions=2, rows=0,
             upstream="mariadb", causes=("published_then_rolled_back",)),
    Scenario("S23", "records created near the window end, sent after its grace", "004",
             [("loss", "write", "db->topic")], s23, causes=("arrived_after_grace",)),
    Scenario("S24", "a transactional producer SIGKILLed mid-transaction, its "
             "transaction.timeout.ms 15 minutes", "003", [], s24, rows=1000,
             status="inconclusive", reason="open_transaction", truth=s24_truth,
             bite=s24_bite),
    Scenario("S25", "an exactly-once processor whose checkpoint interval exceeds the "
             "disorder margin, its last records processed after the window closed", "003, 004",
             [("loss", "write", "db->topic")], s25, causes=("arrived_after_grace",),
             truth=s25_truth),
]}
