"""Each drill app's own record of what it did: one CSV file per event, one line per record.

Lines are flushed as they happen, so an app killed with SIGKILL leaves every line it finished;
a torn last line is ignored on reading. The files are the apps' testimony: what was sent, what
Kafka acknowledged or refused, what was processed and which offsets were committed.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import IO

FILES = {
    "sent": ("id",),                         # handed to the client library
    "acked": ("id", "partition", "offset"),  # delivery report: success
    "failed": ("id", "error"),               # delivery report: error (only with a callback)
    "processed": ("id", "partition", "offset"),  # written to the sink
    "committed": ("partition", "offset"),    # offsets committed for the group
    "hanging": ("first", "last"),            # ids sent in a transaction left open
}


class Ledger:
    """Appends to `<dir>/<event>.csv`; several processes of one app may share a folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._fh: dict[str, IO[str]] = {}

    def write(self, event: str, *values: object) -> None:
        fh = self._fh.get(event)
        if fh is None:
            path = self.folder / f"{event}.csv"
            new = not path.exists()
            fh = self._fh[event] = path.open("a", newline="")
            if new:
                fh.write(",".join(FILES[event]) + "\n")
        fh.write(",".join(str(v).replace(",", ";").replace("\n", " ") for v in values) + "\n")
        fh.flush()

    def close(self) -> None:
        for fh in self._fh.values():
            fh.close()
        self._fh.clear()


def read(folder: Path, event: str) -> list[dict[str, str]]:
    """Every complete line of one event file ([] when the app never wrote it)."""
    path = folder / f"{event}.csv"
    if not path.exists():
        return []
    width = len(FILES[event])
    with path.open(newline="") as fh:
        return [r for r in csv.DictReader(fh) if None not in r.values() and len(r) == width
                and all(r.values())]


def ids(folder: Path, event: str) -> list[int]:
    return [int(r["id"]) for r in read(folder, event)]


def last_offsets(folder: Path, event: str = "processed") -> dict[int, int]:
    """Per partition, the highest offset an event's lines name."""
    last: dict[int, int] = {}
    for r in read(folder, event):
        last[int(r["partition"])] = max(last.get(int(r["partition"]), -1), int(r["offset"]))
    return last
