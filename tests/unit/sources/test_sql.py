"""Staging a SQL tier: its id query checked and counted, its counts query read per bucket, and
whatever is wrong said in one line naming the tier."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from kafka_recon.config import SqlTier
from kafka_recon.errors import ConnectionUnusable, SqlTierError
from kafka_recon.sources.sql import stage_sql_tier
from kafka_recon.window import Window

pytestmark = pytest.mark.unit

WINDOW = Window.parse("2026-11-20T00:00:00Z", "2026-11-21T00:00:00Z", timedelta(0))
HOUR = timedelta(hours=1)


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = tmp_path / "orders.db"
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE orders (id TEXT, event_time TEXT)")
        c.executemany("INSERT INTO orders VALUES (?, ?)", [
            ("1", "2026-11-20 00:10:00"), ("2", "2026-11-20 00:50:00"),
            ("2", "2026-11-20 01:05:00"),  # the same id twice
            ("3", "2026-11-20 23:59:59"), ("4", "2026-11-21 00:00:00")])  # 4: the next window
    return f"sqlite:///{path}"


def tier(conn: str, **query: str) -> SqlTier:
    return SqlTier(name="orders_db", type="sql", conn=conn, **query)


IDS = "SELECT id, event_time FROM orders WHERE event_time >= :start AND event_time < :end"


def test_an_id_tier_is_counted_with_its_distinct_ids_over_the_half_open_window(db: str) -> None:
    staged = stage_sql_tier(tier(db, ids=IDS), WINDOW, HOUR)
    assert (staged.kind, staged.count, staged.distinct) == ("ids", 4, 3)


def test_a_counts_tier_is_read_per_bucket_aligned_on_the_window_and_written_in_utc(
        db: str) -> None:
    counts = ("SELECT strftime('%Y-%m-%d %H:%M:00', event_time) AS bucket, COUNT(*) AS count "
              "FROM orders WHERE event_time >= :start AND event_time < :end GROUP BY 1")
    staged = stage_sql_tier(tier(db, counts=counts), WINDOW, HOUR)
    # 00:10 and 00:50 fall in the 00:00 bucket: minutes are aligned to the flow's hour
    assert staged.buckets == {"2026-11-20T00:00:00Z": 2, "2026-11-20T01:00:00Z": 1,
                              "2026-11-20T23:00:00Z": 1}
    assert staged.count == 4 and staged.distinct is None


def test_an_id_query_without_the_columns_it_needs_names_the_tier_and_the_missing_one(
        db: str) -> None:
    bad = "SELECT id AS order_id, event_time FROM orders WHERE event_time >= :start " \
          "AND event_time < :end"
    with pytest.raises(SqlTierError, match="tier 'orders_db': the 'ids' query returns "
                                           r"columns \['order_id', 'event_time'\].*missing id"):
        stage_sql_tier(tier(db, ids=bad), WINDOW, HOUR)


def test_a_counts_bucket_that_is_not_a_time_is_refused(db: str) -> None:
    counts = "SELECT 'soon' AS bucket, COUNT(*) AS count FROM orders " \
             "WHERE event_time >= :start AND event_time < :end"
    with pytest.raises(SqlTierError, match="the counts query's 'bucket' must be a time"):
        stage_sql_tier(tier(db, counts=counts), WINDOW, HOUR)


def test_a_sqlite_file_that_is_not_there_is_not_created_empty(tmp_path: Path) -> None:
    gone = tmp_path / "gone.db"
    with pytest.raises(SqlTierError, match=f"sqlite file {gone} does not exist"):
        stage_sql_tier(tier(f"sqlite:///{gone}", ids=IDS), WINDOW, HOUR)
    assert not gone.exists()


def test_a_query_the_database_refuses_is_one_line_naming_the_tier(db: str) -> None:
    broken = "SELECT id, event_time FROM no_such_table WHERE event_time >= :start " \
             "AND event_time < :end"
    with pytest.raises(SqlTierError, match="tier 'orders_db' .*no such table") as err:
        stage_sql_tier(tier(db, ids=broken), WINDOW, HOUR)
    assert "\n" not in str(err.value)


def test_a_connection_that_resolves_nowhere_names_the_tier(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW_CONN_NOWHERE", raising=False)
    with pytest.raises(ConnectionUnusable, match="tier 'orders_db': .*nowhere"):
        stage_sql_tier(tier("nowhere", ids=IDS), WINDOW, HOUR)
