"""Topics and tables shaped the way production data is, on the real broker, Spark and SQL:
ids of every type, any time format, malformed records, and id files any CSV reader reads back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.services.kafka import KafkaCluster
from tests.integration.engine_harness import START, Scenario, at, findings, text

pytestmark = pytest.mark.integration

BIG = [9007199254740993, 9223372036854775806, -9223372036854775807, 2147483648, 4294967297,
       -2147483649, 0, 1, -1, 42]


def _record(scn: Scenario, **change: str) -> None:
    """Change the flow's `record:` (id, event_time, event_time_format)."""
    spec = {"id": "$.id", "event_time": "$.ts", **change}
    body = ", ".join(f'{k}: "{v}"' for k, v in spec.items())
    scn.config.write_text(scn.config.read_text().replace(
        'record: {id: "$.id", event_time: "$.ts"}', f"record: {{{body}}}"))


def test_64_bit_ids_in_sqlite_integers_and_json_numbers_compare_exactly(
        kafka: KafkaCluster, tmp_path: Path, spark: Any) -> None:
    scn = Scenario(tmp_path, kafka.bootstrap)
    rows = {i: at(n + 1) for n, i in enumerate(BIG)}
    scn.upstream(rows)
    scn.produce(list(rows.items()))
    lost = {9223372036854775806, -1}
    scn.sink([(i, t) for i, t in rows.items() if i not in lost])
    r = scn.reconcile(spark)
    assert findings(r) == [("loss", "consume", "topic->sink", 2)]
    [f] = [f for f in r["findings"] if f["kind"] == "loss"]
    assert set(scn.texts(f["ids"])) == {"9223372036854775806", "-1"}
    assert [t["distinct"] for t in r["tiers"]] == [len(BIG), len(BIG), len(BIG) - 2]


def test_bigint_and_numeric_ids_in_postgresql_are_the_json_numbers(
        kafka: KafkaCluster, postgres: Any, tmp_path: Path, spark: Any) -> None:
    up = postgres.create_database("ids_up")
    down = postgres.create_database("ids_down")
    scn = Scenario(tmp_path, kafka.bootstrap, up_url=up, down_url=down)
    # the sink keeps its ids as NUMERIC(25,2): 5 is written 5.00 there, and is the same id
    scn._sql(down, "DROP TABLE dst")
    scn._sql(down, "CREATE TABLE dst (id NUMERIC(25, 2), ts TIMESTAMP)")
    scn._sql(up, "DROP TABLE src")
    scn._sql(up, "CREATE TABLE src (id BIGINT PRIMARY KEY, ts TIMESTAMP)")
    rows = {i: at(n + 1) for n, i in enumerate(BIG)}
    scn.upstream(rows)
    scn.produce(list(rows.items()))
    scn.sink([(i, t) for i, t in rows.items() if i != 4294967297])
    r = scn.reconcile(spark)
    assert findings(r) == [("loss", "consume", "topic->sink", 1)]
    [f] = [f for f in r["findings"] if f["kind"] == "loss"]
    assert scn.texts(f["ids"]) == ["4294967297"]


TRICKY = ["a,b", 'say "hi"', " lead", "trail ", "back\\", "tab\there", "new\nline", "é中文",
          "NULL", "null", "007", "7", '"', "=SUM(A1)"]


def test_string_ids_of_any_shape_read_back_exactly_from_the_id_files(
        kafka: KafkaCluster, tmp_path: Path, spark: Any) -> None:
    scn = Scenario(tmp_path, kafka.bootstrap)
    for table in ("src", "dst"):
        scn._sql(scn.up_url if table == "src" else scn.down_url, f"DROP TABLE {table}")
        scn._sql(scn.up_url if table == "src" else scn.down_url,
                 f"CREATE TABLE {table} (id TEXT, ts TEXT)")
    t = at(30)
    scn._sql(scn.up_url, "INSERT INTO src VALUES (:i, :t)",
             [{"i": i, "t": text(t)} for i in TRICKY])
    scn.produce_raw([(i.encode(), json.dumps({"id": i, "ts": text(t)}).encode(), t)
                     for i in TRICKY])
    kept = TRICKY[:3]  # the sink has only these
    scn._sql(scn.down_url, "INSERT INTO dst VALUES (:i, :t)", [{"i": i, "t": text(t)}
                                                               for i in kept])
    r = scn.reconcile(spark)
    assert findings(r) == [("loss", "consume", "topic->sink", len(TRICKY) - 3)]
    [f] = [f for f in r["findings"] if f["kind"] == "loss"]
    assert sorted(scn.texts(f["ids"])) == sorted(TRICKY[3:])


def test_the_whole_value_as_the_id_and_a_key_that_is_not_utf8_is_unidentifiable(
        kafka: KafkaCluster, tmp_path: Path, spark: Any) -> None:
    scn = Scenario(tmp_path, kafka.bootstrap)
    for url, table in ((scn.up_url, "src"), (scn.down_url, "dst")):
        scn._sql(url, f"DROP TABLE {table}")
        scn._sql(url, f"CREATE TABLE {table} (id TEXT, ts TEXT)")
    lines = [f"GET /item/{n} 200" for n in range(1, 11)]
    scn._sql(scn.up_url, "INSERT INTO src VALUES (:i, :t)",
             [{"i": v, "t": text(at(n))} for n, v in enumerate(lines, 1)])
    scn._sql(scn.down_url, "INSERT INTO dst VALUES (:i, :t)",
             [{"i": v, "t": text(at(n))} for n, v in enumerate(lines, 1)])
    scn.produce_raw([(None, v.encode(), at(n)) for n, v in enumerate(lines, 1) if n != 4])
    _record(scn, id="value", event_time="kafka_timestamp")
    r = scn.reconcile(spark)
    assert findings(r) == [("loss", "write", "db->topic", 1)]  # the sink's copy came another way
    [f] = [f for f in r["findings"] if f["kind"] == "loss"]
    assert scn.texts(f["ids"]) == ["GET /item/4 200"]

    (tmp_path / "k").mkdir()
    by_key = Scenario(tmp_path / "k", kafka.bootstrap)
    by_key.upstream({1: at(1)})
    by_key.sink([(1, at(1))])
    by_key.produce_raw([(b"1", b"{}", at(1)), (b"\xff\xfe", b"{}", at(2))])
    _record(by_key, id="key", event_time="kafka_timestamp")
    r = by_key.reconcile(spark)
    assert findings(r) == [("unidentifiable", "write", "topic", 1)]
    [f] = [f for f in r["findings"] if f["kind"] == "unidentifiable"]
    assert (by_key.texts(f["ids"], "partition"), by_key.texts(f["ids"], "offset")) == (
        ["0"], ["1"])


def test_a_malformed_event_time_is_unidentifiable_and_every_good_record_still_counts(
        kafka: KafkaCluster, tmp_path: Path, spark: Any) -> None:
    scn = Scenario(tmp_path, kafka.bootstrap)
    rows = {i: at(i * 10) for i in range(1, 21)}
    scn.upstream(rows)
    scn.sink(list(rows.items()))
    scn.produce_raw([(str(i).encode(), json.dumps(
        {"id": i, "ts": "yesterday" if i in (3, 4) else t.strftime("%Y-%m-%dT%H:%M:%SZ")}
    ).encode(), t) for i, t in rows.items()])
    # inside the window as text, so the tier's query selects it, but not a time
    scn._sql(scn.down_url, "INSERT INTO dst VALUES (99, :t)",
             [{"t": START.strftime("%Y-%m-%d 25:61:00")}])
    r = scn.reconcile(spark)
    topic = next(t for t in r["tiers"] if t["name"] == "topic")
    sink = next(t for t in r["tiers"] if t["name"] == "sink")
    assert (topic["count"], topic["unidentifiable"]) == (18, 2)
    assert (sink["count"], sink["unidentifiable"]) == (20, 1)
    unid = {f["hop"]: f for f in r["findings"] if f["kind"] == "unidentifiable"}
    assert sorted(int(o) for o in scn.texts(unid["topic"]["ids"], "offset")) == [2, 3]
    assert scn.texts(unid["sink"]["ids"]) == ["99"]
    # the two unreadable topic records are missing there by id, and named
    assert ("loss", "write", "db->topic", 2) in findings(r)


# Debezium's ts_ms on the real broker; every unit and format is read by the same column
# function, each checked against the same instant in tests/unit/spark/test_records.py
@pytest.mark.parametrize(("fmt", "scale"), [("epoch_ms", 10**3)])
def test_epoch_event_times_reconcile_against_the_same_rows_in_sql(
        kafka: KafkaCluster, tmp_path: Path, spark: Any, fmt: str, scale: int) -> None:
    scn = Scenario(tmp_path, kafka.bootstrap)
    rows = {i: at(i * 37) for i in range(1, 31)}
    scn.upstream(rows)
    scn.sink(list(rows.items()))
    scn.produce_raw([(str(i).encode(), json.dumps(
        {"id": i, "ts": int(t.timestamp()) * scale}).encode(), t) for i, t in rows.items()])
    _record(scn, event_time_format=fmt)
    r = scn.reconcile(spark)
    assert (r["status"], findings(r)) == ("ok", [])
    assert [t["count"] for t in r["tiers"]] == [30, 30, 30]


def test_a_postgresql_session_in_another_time_zone_selects_the_same_utc_window(
        kafka: KafkaCluster, postgres: Any, tmp_path: Path, spark: Any) -> None:
    up = postgres.create_database("tz_up")
    down = postgres.create_database("tz_down")
    for url in (up, down):
        db = url.rsplit("/", 1)[1]
        Scenario._sql(url, f"ALTER DATABASE {db} SET timezone TO 'Asia/Shanghai'")
    scn = Scenario(tmp_path, kafka.bootstrap, up_url=up, down_url=down)
    for url, table in ((up, "src"), (down, "dst")):
        scn._sql(url, f"DROP TABLE {table}")
        scn._sql(url, f"CREATE TABLE {table} (id BIGINT, ts TIMESTAMPTZ)")
    # rows at both edges of the window: 8 hours off would miss many and take others
    edges = [START.replace(hour=h, minute=m) for h in (0, 1, 5, 7, 16, 18, 22, 23)
             for m in (0, 30)]
    rows = {i: t for i, t in enumerate(edges, 1)}
    for url, table in ((up, "src"), (down, "dst")):
        scn._sql(url, f"INSERT INTO {table} VALUES (:i, :t)",
                 [{"i": i, "t": t} for i, t in rows.items()])  # aware datetimes: UTC instants
    scn.produce(list(rows.items()))
    r = scn.reconcile(spark)
    assert (r["status"], findings(r)) == ("ok", [])
    assert [t["count"] for t in r["tiers"]] == [len(rows)] * 3

    # a counts: tier over the same session reads the same buckets
    counts = ("counts: \"SELECT date_trunc('hour', ts) AS bucket, count(*) AS count FROM dst "
              "WHERE ts >= :start AND ts < :end GROUP BY 1\"")
    config = scn.config.read_text()
    ids_line = next(line for line in config.splitlines() if "FROM dst" in line)
    scn.config.write_text(config.replace(ids_line, "        " + counts))
    r = scn.reconcile(spark)
    assert (r["status"], findings(r)) == ("ok", [])
    sink = next(t for t in r["tiers"] if t["name"] == "sink")
    assert sink["count"] == len(rows)


def _debezium(op: str, row_id: int, t: Any, with_schema: bool, *, deleted_before: bool = False
              ) -> tuple[bytes, bytes | None]:
    """A change event as Debezium's JsonConverter writes it (schemas.enable true or false)."""
    ms = int(t.timestamp() * 1000)
    image = {"id": row_id, "ts": ms}
    source = {"version": "2.7.3.Final", "connector": "postgresql", "name": "shop",
              "ts_ms": ms + 500, "snapshot": "true" if op == "r" else "false", "db": "shop",
              "schema": "public", "table": "orders", "txId": 700 + row_id, "lsn": 9000 + row_id}
    payload = {"before": {"id": row_id, "ts": None} if deleted_before else None,
               "after": None if op == "d" else image, "source": source, "op": op,
               "ts_ms": ms + 900, "transaction": None}
    key: dict[str, Any] = {"id": row_id}
    if with_schema:
        row = {"type": "struct", "optional": True, "name": "shop.public.orders.Value",
               "fields": [{"type": "int64", "optional": False, "field": "id"},
                          {"type": "int64", "optional": True, "field": "ts",
                           "name": "io.debezium.time.Timestamp", "version": 1}]}
        schema = {"type": "struct", "optional": False, "name": "shop.public.orders.Envelope",
                  "version": 2, "fields": [{**row, "field": "before"}, {**row, "field": "after"},
                                           {"type": "struct", "field": "source", "fields": []},
                                           {"type": "string", "field": "op"},
                                           {"type": "int64", "field": "ts_ms"}]}
        payload = {"schema": schema, "payload": payload}
        key = {"schema": {"type": "struct", "optional": False, "name": "shop.public.orders.Key",
                          "fields": [{"type": "int64", "optional": False, "field": "id"}]},
               "payload": key}
    return json.dumps(key).encode(), json.dumps(payload).encode()


# with the schema part here; without it, the same events in tests/unit/spark/test_records.py
@pytest.mark.parametrize("with_schema", [True])
def test_a_debezium_topic_reconciles_creates_updates_deletes_and_tombstones(
        kafka: KafkaCluster, tmp_path: Path, spark: Any, with_schema: bool) -> None:
    scn = Scenario(tmp_path, kafka.bootstrap)
    rows = {i: at(i * 20) for i in range(1, 21)}
    scn.upstream(rows)  # the table keeps every row of the window (15 is soft-deleted there)
    scn.sink([(i, t) for i, t in rows.items() if i != 12])
    events = [(*_debezium("r" if i <= 5 else "c", i, t, with_schema), t)
              for i, t in rows.items()]
    for i in (3, 3, 9):  # updates: one id present, never a duplicate
        events.append((*_debezium("u", i, rows[i], with_schema), rows[i]))
    key, value = _debezium("d", 15, rows[15], with_schema, deleted_before=True)
    events += [(key, value, rows[15]), (key, None, rows[15])]  # the delete, then its tombstone
    scn.produce_raw(events)
    _record(scn, envelope="debezium", event_time_format="epoch_ms")
    r = scn.reconcile(spark)
    assert findings(r) == [("loss", "consume", "topic->sink", 1)]
    [f] = [f for f in r["findings"] if f["kind"] == "loss"]
    assert scn.texts(f["ids"]) == ["12"]
    topic = next(t for t in r["tiers"] if t["name"] == "topic")
    assert (topic["count"], topic["distinct"], topic["unidentifiable"]) == (24, 20, 0)


def test_timestamp_jitter_at_the_window_end_within_the_margin_hides_no_record(
        kafka: KafkaCluster, tmp_path: Path, spark: Any) -> None:
    from datetime import timedelta

    from tests.integration.engine_harness import END

    scn = Scenario(tmp_path, kafka.bootstrap, partitions=1)
    rows = {i: at(i * 30) for i in range(1, 11)}
    last = {11: END - timedelta(minutes=1)}
    scn.upstream({**rows, **last})
    scn.sink(list({**rows, **last}.items()))
    scn.produce(list(rows.items()))
    closes = END + timedelta(minutes=10)
    # another producer's clock runs ahead: its record, of the next window, lands first ...
    scn.produce_raw([(b"900", json.dumps({"id": 900, "ts": text(END + timedelta(hours=1))}
                                         ).encode(), closes + timedelta(seconds=2))])
    # ... and the window's last record, stamped 2 seconds earlier, after it
    scn.produce(list(last.items()), arrival=closes - timedelta(seconds=1))
    r = scn.reconcile(spark)
    assert r["status"] == "ok", r["reasons"]
    assert findings(r) == [("late", "write", "db->topic", 1)]


def test_disorder_wider_than_the_margin_is_inconclusive(kafka: KafkaCluster, tmp_path: Path,
                                                        spark: Any) -> None:
    from datetime import timedelta

    scn = Scenario(tmp_path, kafka.bootstrap, partitions=1)
    rows = {i: at(i * 30) for i in range(1, 11)}
    scn.upstream(rows)
    scn.sink(list(rows.items()))
    scn.produce(list(rows.items())[:5])
    # a back-filling producer writes a record stamped an hour before the window among them
    scn.produce_raw([(b"901", json.dumps({"id": 901, "ts": text(at(-60))}).encode(),
                      START - timedelta(hours=1))])
    scn.produce(list(rows.items())[5:])
    r = scn.reconcile(spark)
    assert r["status"] == "inconclusive"
    assert "by more than the flow's disorder margin (300s)" in r["reasons"][0]


def test_uuid_ids_in_postgresql_are_the_json_strings(kafka: KafkaCluster, postgres: Any,
                                                     tmp_path: Path, spark: Any) -> None:
    import uuid

    up = postgres.create_database("uuid_up")
    down = postgres.create_database("uuid_down")
    scn = Scenario(tmp_path, kafka.bootstrap, up_url=up, down_url=down)
    for url, table in ((up, "src"), (down, "dst")):
        scn._sql(url, f"DROP TABLE {table}")
        scn._sql(url, f"CREATE TABLE {table} (id UUID, ts TIMESTAMP)")
    ids = [uuid.UUID(int=n * 0x1234567890ABCDEF1234567890ABCDEF % 2**128) for n in range(1, 9)]
    t = at(90)
    for url, table, keep in ((up, "src", ids), (down, "dst", ids[1:])):
        scn._sql(url, f"INSERT INTO {table} VALUES (CAST(:i AS UUID), :t)",
                 [{"i": str(i), "t": t.replace(tzinfo=None)} for i in keep])
    scn.produce_raw([(None, json.dumps({"id": str(i), "ts": text(t)}).encode(), t)
                     for i in ids])
    r = scn.reconcile(spark)
    assert findings(r) == [("loss", "consume", "topic->sink", 1)]
    [f] = [f for f in r["findings"] if f["kind"] == "loss"]
    assert scn.texts(f["ids"]) == [str(ids[0])]


def test_a_sql_tier_is_read_in_the_slices_it_names_each_record_once(
        postgres: Any, spark: Any) -> None:
    """A slice is one query and one task of the reconcile's first stage: a tier is read in
    JDBC_SLICES of them unless it names its own `slices` (an indexed table on a larger
    cluster), and the slices, with the one for whatever they do not cover, still hold every
    record once."""
    from datetime import timedelta

    import sqlalchemy

    from kafka_recon.config import SqlTier
    from kafka_recon.sources.connections import resolve
    from kafka_recon.spark import read as rd
    from kafka_recon.window import Window

    url = postgres.create_database("sliced_up")
    rows = 1000
    engine = sqlalchemy.create_engine(resolve(url))
    with engine.begin() as c:
        c.execute(sqlalchemy.text(
            f"CREATE TABLE t AS SELECT g AS id, TIMESTAMP '{START:%Y-%m-%d %H:%M:%S}' "
            f"+ g * INTERVAL '80 second' AS ts FROM generate_series(1, {rows}) g"))
        c.execute(sqlalchemy.text("INSERT INTO t VALUES (0, NULL)"))  # in no time slice
    engine.dispose()
    tier = SqlTier(name="t", type="sql", conn=url,
                   ids="SELECT id, ts AS event_time FROM t "
                       "WHERE ts IS NULL OR (ts >= :start AND ts < :end)")
    window = Window(START, START + timedelta(days=1))
    plain = rd.read_sql_tier(spark, tier, window)
    sliced = rd.read_sql_tier(spark, tier.model_copy(update={"slices": 11}), window)
    assert plain.rdd.getNumPartitions() == rd.JDBC_SLICES + 1
    assert sliced.rdd.getNumPartitions() == 11 + 1
    for df in (plain, sliced):
        assert df.count() == df.select("id").distinct().count() == rows + 1


def test_a_postgresql_tier_arrives_through_a_cursor_in_batches_not_whole(
        postgres: Any, spark: Any) -> None:
    """PostgreSQL's driver holds a whole result in memory unless it fetches through a cursor:
    a slice of millions of ids would have to fit in one task's heap. The server's log shows
    each batch fetched from the query's portal."""
    from datetime import timedelta

    import sqlalchemy

    from kafka_recon.config import SqlTier
    from kafka_recon.sources.connections import resolve
    from kafka_recon.sources.dialects import FETCH_ROWS
    from kafka_recon.spark.read import read_sql_tier
    from kafka_recon.window import Window

    url = postgres.create_database("cursor_up")
    rows = 3 * FETCH_ROWS
    engine = sqlalchemy.create_engine(resolve(url))
    with engine.begin() as c:
        c.execute(sqlalchemy.text(
            f"CREATE TABLE big AS SELECT g AS id, TIMESTAMP '{START:%Y-%m-%d %H:%M:%S}' "
            f"+ g * INTERVAL '1 second' AS ts FROM generate_series(1, {rows}) g"))
        c.execute(sqlalchemy.text("ALTER DATABASE cursor_up SET log_statement = 'all'"))
    engine.dispose()
    tier = SqlTier(name="big", type="sql", conn=url,
                   ids="SELECT id, ts AS event_time FROM big WHERE ts >= :start AND ts < :end")
    got = read_sql_tier(spark, tier, Window(START, START + timedelta(days=1)))
    assert got.count() == rows
    log = (postgres.base_dir / "log").read_text()
    fetches = [line for line in log.splitlines()
               if "execute fetch from" in line and "FROM big" in line]
    assert len(fetches) >= rows // FETCH_ROWS - 1, "no batches: the whole result came at once"
