"""DESIGN.md's loss scenario catalogue, each as settings, an act and the finding it must give.

An act starts the apps with the seed's settings and injects the fault when the cluster and the
ledgers show the state the fault needs (the leader really is the broker killed; the records
really are acknowledged by the leader alone; the offsets really are committed past what was
processed). What each act saw is kept as evidence in the matrix.
"""

from __future__ import annotations

import time

from kafka_recon.drill import ledger
from kafka_recon.drill.faults import (
    alter_topic,
    leader_of,
    partition_state,
    wait_for,
    wait_isr,
    wait_leader_moved,
)
from kafka_recon.drill.runner import App, Ctx, Scenario, Truth

RATE = 500  # records/s: sending lasts seconds, so a fault lands in the middle of it


def _grown(app: App, event: str, by: int, timeout: float = 60) -> int:
    base = app.count(event)
    return int(wait_for(f"{by} more '{event}' in the {app.role}'s ledger",
                        lambda: (n := app.count(event)) >= base + by and n, timeout))


def _follower(ctx: Ctx, leader: int) -> int:
    state = partition_state(ctx.bootstrap, ctx.topic) or {}
    return next(r for r in state["replicas"] if r != leader)


def _kill_leader_with_lagging_follower(ctx: Ctx, producer: App, progress: str,
                                       shrink: bool) -> None:
    """Pause the follower, let the leader alone take records, SIGKILL the leader, let the
    follower (which never copied them) take over, restart the old leader."""
    _grown(producer, progress, 500)
    leader = leader_of(ctx.bootstrap, ctx.topic)
    follower = _follower(ctx, leader)
    ctx.cluster.pause(follower)
    ctx.note(f"follower {follower} paused (SIGSTOP) at {producer.count(progress)} {progress}")
    if shrink:
        isr = wait_isr(ctx.bootstrap, ctx.topic, 0, lambda isr: isr == [leader],
                       f"[{leader}] (the follower dropped out)")
        ctx.note(f"ISR shrank to {isr}")
    n = _grown(producer, progress, 300)
    now = leader_of(ctx.bootstrap, ctx.topic)
    if now != leader:
        raise RuntimeError(f"the leader moved to {now} before the kill")
    ctx.cluster.kill(leader)
    ctx.note(f"leader {leader} (from metadata) SIGKILLed at {n} {progress}, "
             f"300+ of them taken by the leader alone")
    ctx.cluster.resume(follower)
    new = wait_leader_moved(ctx.bootstrap, ctx.topic, 0, leader, timeout=90)
    ctx.note(f"follower {new} elected leader")
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
    _kill_leader_with_lagging_follower(ctx, p, "sent", shrink=False)
    c = ctx.consumer()
    p.wait()
    ctx.drain(c)


def s2(ctx: Ctx) -> None:
    p = ctx.producer(config={"acks": "1", "enable.idempotence": False}, rate=RATE)
    _kill_leader_with_lagging_follower(ctx, p, "acked", shrink=True)
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
    from kafka_recon.drill.faults import partition_count
    from kafka_recon.topic import committed_offsets

    parts = list(range(partition_count(ctx.bootstrap, ctx.topic)))
    got = committed_offsets(ctx.bootstrap, ctx.topic, [ctx.group], parts)[ctx.group]
    return {p: o for p, o in got.items() if o >= 0}


def _processed_max(app: App) -> dict[int, int]:
    done: dict[int, int] = {}
    for r in ledger.read(app.ledger, "processed"):
        done[int(r["partition"])] = max(done.get(int(r["partition"]), -1), int(r["offset"]))
    return done


def _committed_past_processed(ctx: Ctx, app: App) -> bool:
    """Offsets committed for records the app has fetched but not processed yet."""
    committed = _broker_committed(ctx)
    done = _processed_max(app)
    return any(off > done.get(p, -1) + 1 for p, off in committed.items())


def _processed_past_committed(ctx: Ctx, app: App) -> bool:
    """Records processed after the last commit: a crash now replays them."""
    committed = _broker_committed(ctx)
    done = _processed_max(app)
    return bool(committed) and any(off >= committed.get(p, 0) + 50 for p, off in done.items())


def _crash_consumer(ctx: Ctx, commit: str, when: str) -> None:
    p = ctx.producer()
    assert p.wait() == 0
    spec = {"commit": commit, "batch": 200, "process_ms": 4}
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
    raise NotImplementedError("S9 needs retention-aware reconciliation")


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
    leader = leader_of(ctx.bootstrap, ctx.topic)
    follower = _follower(ctx, leader)
    ctx.cluster.pause(follower)
    isr = wait_isr(ctx.bootstrap, ctx.topic, 0, lambda isr: follower not in isr,
                   f"without {follower}")
    ctx.note(f"follower {follower} paused; ISR shrank to {isr}")
    _grown(p, "acked", 200)
    if leader_of(ctx.bootstrap, ctx.topic) != leader:
        raise RuntimeError("the leader moved before the kill")
    ctx.cluster.kill(leader)
    ctx.note(f"leader {leader} (from metadata) SIGKILLed at {p.count('acked')} acked")
    ctx.cluster.resume(follower)
    new = wait_leader_moved(ctx.bootstrap, ctx.topic, 0, leader, timeout=90)
    ctx.note(f"broker {new} elected from the ISR")
    ctx.cluster.restart(leader)
    assert p.wait() == 0
    ctx.drain(c)


def s13(ctx: Ctx) -> None:
    from datetime import UTC, datetime, timedelta

    from kafka_recon.drill.runner import _exec, sql_time

    end = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=12)
    late = list(range(ctx_rows(ctx) - 19, ctx_rows(ctx) + 1))
    _exec(ctx.upstream, "UPDATE src SET ts = ? WHERE id >= ?",
          [(sql_time(end - timedelta(seconds=1)), late[0])])
    ctx.window_end, ctx.grace_s = end, 20
    p = ctx.producer(hold={"ids": late, "until": (end + timedelta(seconds=3)).timestamp()})
    c = ctx.consumer()
    assert p.wait() == 0
    ctx.note(f"{len(late)} records created a second before the window end, sent 3 s after it "
             f"(grace 20 s)")
    ctx.drain(c)


def ctx_rows(ctx: Ctx) -> int:
    import sqlite3

    con = sqlite3.connect(ctx.upstream)
    n = int(con.execute("SELECT max(id) FROM src").fetchone()[0])
    con.close()
    return n


def s14(ctx: Ctx) -> None:
    from kafka_recon.drill.runner import _exec

    p = ctx.producer()
    c = ctx.consumer()
    assert p.wait() == 0
    ctx.drain(c)
    ts = _max_ts(ctx)
    _exec(ctx.sinks["sink"], "INSERT INTO dst VALUES (?, ?)",
          [(900_000 + i, ts) for i in range(1, 8)])
    ctx.note("a backfill script wrote 7 rows straight into the sink table")


def _max_ts(ctx: Ctx) -> str:
    import sqlite3

    con = sqlite3.connect(ctx.upstream)
    ts = str(con.execute("SELECT max(ts) FROM src").fetchone()[0])
    con.close()
    return ts


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


SCENARIOS: dict[str, Scenario] = {s.id: s for s in [
    Scenario("S1", "producer acks=0, leader killed and restarted while sending", "000, 001, 002",
             [("loss", "write", "db->topic")], s1, replication=2),
    Scenario("S2", "acks=1, ISR shrank to the leader, leader killed, unclean election",
             "000-004", [("loss", "write", "db->topic")], s2, replication=2, rows=8000,
             topic_config={"unclean.leader.election.enable": "true"}, bite=_lost_acked),
    Scenario("S3", "fire-and-forget send, partition offline past delivery.timeout.ms",
             "000, 001", [("loss", "write", "db->topic")], s3, replication=1),
    Scenario("S4", "record larger than the topic's max.message.bytes", "000, 004",
             [("loss", "write", "db->topic")], s4, topic_config={"max.message.bytes": "8192"},
             bite=s4_bite),
    Scenario("S5", "enable.auto.commit=true, consumer killed mid-batch", "000-004",
             [("loss", "consume", "topic->{sink}")], s5, partitions=2),
    Scenario("S6", "commit before processing, consumer killed mid-batch", "000",
             [("loss", "consume", "topic->{sink}")], s6, partitions=2),
    Scenario("S7", "retries without idempotence, acks lost to request timeouts", "000, 003",
             [("duplicate", "write", "db->topic")], s7, rows=6000,
             topic_config={"min.insync.replicas": "2"}),
    Scenario("S8", "processed, killed before commit, reprocessed", "000, 004",
             [("duplicate", "consume", "topic->{sink}")], s8, partitions=2),
    Scenario("S11", "transactions, every third aborted, read_committed", "003", [], s11,
             partitions=2, status="ok"),
    Scenario("S12", "safe config under a paused follower, a killed leader and a killed "
             "consumer", "000-004", [], s12, status="ok", rows=10000,
             topic_config={"min.insync.replicas": "2",
                           "unclean.leader.election.enable": "false"}),
    Scenario("S13", "records created near the window end, arriving inside grace", "004",
             [("late", "write", "db->topic")], s13, status="ok"),
    Scenario("S14", "rows written into the sink by someone else", "004",
             [("unexpected", "consume", "topic->{sink}")], s14),
    Scenario("S15", "two applications sharing one group.id, two sinks", "004",
             [("loss", "consume", "topic->{sink}")], s15, partitions=4,
             sinks=("sink_a", "sink_b"), bite=s15_bite),
]}
