"""What each repair delivery sent, in kafka-recon's store: one row per delivery and hop, with
the plan's digest and the run-folder file of the ids it sent.

It is the record for people and pages (which plan re-delivered what, when, where to), not the
ledger: whether a record was already re-delivered is read from the committed records of the
topic it went to (`kafka_recon.spark.repair_topic`), which are exactly what was delivered,
where a row written here after the Kafka commit would be missing after a crash between the two.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Column, MetaData, String, Table, Text, select
from sqlalchemy.exc import SQLAlchemyError

from kafka_recon.runfiles.repair import RepairDelivery
from kafka_recon.stores.database import engine, store_url, unreachable
from kafka_recon.stores.snapshots import replace_rows

metadata = MetaData()

repair_delivered = Table(
    "repair_delivered", metadata,
    Column("flow", String(200), primary_key=True),
    Column("window_start", String(40), primary_key=True),
    Column("window_end", String(40), primary_key=True),
    Column("plan_digest", String(64), primary_key=True),
    Column("delivered_at", String(40), primary_key=True),
    Column("hop", String(400), primary_key=True),
    Column("target", String(300)),  # the topic published to; none: not published
    Column("sent", BigInteger, nullable=False),
    Column("already", BigInteger, nullable=False),
    Column("ids_file", Text),  # the ids sent, in the run folder
    Column("run_folder", Text, nullable=False),
)


def record(flow: str, window: dict[str, str], delivery: RepairDelivery, run_folder: str
           ) -> None:
    """Keep a finished delivery's rows (StoreUnreachable when the store does not answer)."""
    url = store_url()
    rows = [{"flow": flow, "window_start": window["start"], "window_end": window["end"],
             "plan_digest": delivery.plan_digest, "delivered_at": delivery.delivered_at,
             "hop": h.hop, "target": h.target, "sent": h.sent, "already": h.already,
             "ids_file": h.ids_file, "run_folder": run_folder} for h in delivery.hops]
    try:
        with engine(url, metadata).begin() as con:
            replace_rows(con, repair_delivered, rows)
    except SQLAlchemyError as exc:
        raise unreachable(url, exc) from exc


def deliveries(flow: str) -> list[dict[str, Any]]:
    """A flow's delivered hops, oldest first."""
    url = store_url()
    try:
        with engine(url, metadata).connect() as con:
            found = con.execute(select(repair_delivered)
                                .where(repair_delivered.c.flow == flow)
                                .order_by(repair_delivered.c.delivered_at,
                                          repair_delivered.c.hop))
            return [dict(r._mapping) for r in found]
    except SQLAlchemyError as exc:
        raise unreachable(url, exc) from exc
