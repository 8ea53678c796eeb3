"""Upstream and sink tables of the demo, in SQLite."""

from __future__ import annotations

import random
import sqlite3
from datetime import datetime, timedelta
from pathlib import Path

ORDERS_DDL = """CREATE TABLE IF NOT EXISTS {table} (
    order_id INTEGER PRIMARY KEY,
    created_at TEXT NOT NULL,   -- UTC, 'YYYY-MM-DD HH:MM:SS'
    customer TEXT NOT NULL,
    amount REAL NOT NULL)"""


def create_orders(db: Path, start: datetime, end: datetime, n: int, seed: int = 7) -> int:
    """Fill `orders` with n rows whose created_at spreads over [start, end). Returns n."""
    rnd = random.Random(seed)
    span = int((end - start).total_seconds())
    rows = [
        (i, (start + timedelta(seconds=rnd.randrange(span))).strftime("%Y-%m-%d %H:%M:%S"),
         f"customer-{rnd.randrange(200)}", round(rnd.uniform(5, 500), 2))
        for i in range(1, n + 1)
    ]
    with sqlite3.connect(db) as con:
        con.execute("DROP TABLE IF EXISTS orders")
        con.execute(ORDERS_DDL.format(table="orders"))
        con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", rows)
    return n


def create_sink(db: Path) -> None:
    with sqlite3.connect(db) as con:
        con.execute("DROP TABLE IF EXISTS orders_copy")
        con.execute(ORDERS_DDL.format(table="orders_copy"))


def ids(db: Path, table: str) -> set[int]:
    with sqlite3.connect(db) as con:
        return {r[0] for r in con.execute(f"SELECT order_id FROM {table}")}  # noqa: S608
