"""The one comparison: every id tier's ids grouped by id once, and what each id counts for at
each hop read off its row (missing, unexpected, duplicate, filtered)."""

from __future__ import annotations

from datetime import datetime
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kafka_recon.spark.session import names


# ------------------------------------------------------------------ the one comparison
def compare(records: list[DataFrame], collapse: frozenset[int] = frozenset(),
            dropping: frozenset[int] = frozenset()) -> DataFrame:
    """Every id of every id tier in one row: (id, n0, b0, n1, b1, ...), `n<i>` how many times
    id tier i holds the id (0: not at all), `b<i>` the bucket of its first event there; for a
    tier in `dropping` (a topic whose records say whether the processor after it drops them on
    purpose), `d<i>` how many of those records are declared drops.

    The tiers' window records are stacked and grouped by id once: one shuffle answers every
    hop, where a join per hop would re-read and re-shuffle each tier for each comparison. A
    tier in `collapse` (a change stream) counts an id once however many updates and deletes
    carry it, and once per create or snapshot read (`op` c or r): a row captured twice has a
    copy.

    The records are shuffled by id as they are, and only then aggregated: an id is nearly
    always once per tier, so an aggregation before the shuffle (Spark's partial one, over each
    cached partition of a tier) merges nothing. It cost a hash map as large as the partition,
    spilled and merged back from disk: at 10M records a topic's partition holds 5M ids, and
    the merge's read buffers, one per spill file, ran a 1g driver out of heap
    (docs/performance-history.md, "... the comparison without a partial aggregation")."""
    tagged = reduce(lambda x, y: x.unionByName(y),
                    [df.select("id", "bucket", F.lit(i).alias("tier"),
                               (F.col("dropped") if i in dropping else F.lit(False))
                               .alias("dropped"),
                               (F.col("op") if i in collapse and "op" in df.columns
                                else F.lit(None).cast("string")).alias("op"))
                     for i, df in enumerate(records)])
    aggs: list[Column] = []
    for i in range(len(records)):
        n = F.count(F.when(F.col("tier") == i, 1))
        if i in collapse:
            made = F.count(F.when((F.col("tier") == i) & F.col("op").isin("c", "r"), 1))
            n = F.greatest(made, F.least(n, F.lit(1)))
        aggs += [n.alias(f"n{i}"),
                 F.min(F.when(F.col("tier") == i, F.col("bucket"))).alias(f"b{i}")]
        if i in dropping:
            aggs.append(F.count(F.when((F.col("tier") == i) & F.col("dropped"), 1))
                        .alias(f"d{i}"))
    return tagged.repartition("id").groupBy(*names("id")).agg(*aggs)


def marks(compared: DataFrame, tiers: int, hops: list[tuple[int, int, list[int]]],
          dropping: frozenset[int] = frozenset(), dead: dict[int, int] | None = None
          ) -> DataFrame:
    """(id, kind, at, bucket, value): what each id counts for, read off its one compared row.

    `present` at tier i (value 1): the tier holds the id, in the bucket of its first event
    there. For each hop k = (up, down, before) between two id tiers:

    - `missing` at k: the up tier has it and the down tier lacks it (bucket: up's); when up
      is in `dropping` (a processor's hop with declared drops), only a record of it that is
      not a declared drop makes it missing, and an id whose every record up is one, absent
      down, is `filtered` at k instead (bucket: up's);
    - `unexpected` at k: the down tier has it and no id tier in `before` (every id tier up to
      the hop's start) does: someone else wrote it (bucket: down's);
    - `dead_lettered` at k, for a hop into a sink connector whose dead-letter queue is compared
      in slot `dead[k]`: the up tier has it, the down tier lacks it and the queue holds it;
      it is then not `missing` (bucket: up's);
    - `duplicate` at k, value the copies down holds beyond what up already had: a duplicate
      belongs to the tier where it first appears, so an id twice in the topic and twice in the
      sink is the topic's, not the sink's (bucket: down's).
    """
    def n(i: int) -> Column:
        return F.col(f"n{i}")

    def b(i: int) -> Column:
        return F.col(f"b{i}")

    def mark(cond: Column, kind: str, at: int, bucket: Column,
             value: Column | None = None) -> Column:
        return F.when(cond, F.struct(F.lit(kind).alias("kind"), F.lit(at).alias("at"),
                                     bucket.alias("bucket"),
                                     (value if value is not None else F.lit(1))
                                     .cast("long").alias("value")))

    cols = [mark(n(i) > 0, "present", i, b(i)) for i in range(tiers)]
    for k, (up, down, before) in enumerate(hops):
        base = F.greatest(n(up), F.lit(1))
        nowhere = reduce(lambda x, y: x & y, [n(t) == 0 for t in before])
        if up in dropping:
            kept = n(up) - F.col(f"d{up}")
            cols += [mark((kept > 0) & (n(down) == 0), "missing", k, b(up)),
                     mark((n(up) > 0) & (kept == 0) & (n(down) == 0), "filtered", k, b(up))]
        elif dead and k in dead:
            q = dead[k]
            cols += [mark((n(up) > 0) & (n(down) == 0) & (n(q) == 0), "missing", k, b(up)),
                     mark((n(up) > 0) & (n(down) == 0) & (n(q) > 0), "dead_lettered", k,
                          b(up))]
        else:
            cols.append(mark((n(up) > 0) & (n(down) == 0), "missing", k, b(up)))
        cols += [mark((n(down) > 0) & nowhere, "unexpected", k, b(down)),
                 mark(n(down) > base, "duplicate", k, b(down), n(down) - base)]
    # explode, then drop the empty slots: a lambda (`F.filter`) would run interpreted, row by row
    return (compared.select("id", F.explode(F.array(*cols)).alias("m"))
            .where(F.col("m").isNotNull())
            .select("id", "m.kind", "m.at", "m.bucket", "m.value"))


def ids_of(compared: DataFrame, at: int) -> DataFrame:
    """(id, n, bucket): the ids id tier `at` holds, how many times, in the bucket of the first."""
    return compared.where(F.col(f"n{at}") > 0).select(
        "id", F.col(f"n{at}").alias("n"), F.col(f"b{at}").alias("bucket"))


def missing(up: DataFrame, down: DataFrame) -> DataFrame:
    """Ids the upstream tier has and the downstream tier lacks (a left anti-join): for the
    stretches the one comparison does not cover (ids across count-only tiers, retention)."""
    return up.select("id", "bucket").join(down.select("id"), "id", "left_anti")


def late(topic: DataFrame, end: datetime) -> DataFrame:
    """Window records that reached the topic after the window closed, inside grace."""
    return topic.where(F.col("kafka_ts") >= F.lit(end)).select("id", "bucket")
