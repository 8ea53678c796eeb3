"""The Reconciliation page's grid: every flow by its windows over a span, each window's cell
coloured by its verdict, from one read of the history (`history.windows_between`) and of the
held leases, never a file per cell.

A flow's windows are its schedule's (aligned on its window length from the epoch, as its DAG
schedules them); a window recorded off that grid (an ad-hoc run's) takes the slot its start
falls in. A slot no run recorded is `running` while a run holds its lease, `not_closed` until
its closing time has passed, and `no_run` after that (a missed window is a gap to see, not an
ok).

A row is compact, because a fleet's day is tens of thousands of cells (200 flows of 5-minute
windows: 57,600): a letter per slot (`CODES`), the first slot's start and the step, and only
for the slots that need them the verdict line (a window that is not ok) and the run folder's
name (a window recorded off the schedule). The page draws the cells from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from kafka_recon.window import iso_z, parse_instant

if TYPE_CHECKING:
    from kafka_recon.config import Flow

# every verdict a cell can show
VERDICTS = {"findings": "findings", "inconclusive": "inconclusive", "no_run": "no run",
            "running": "running", "not_closed": "not yet closed",
            "tolerated": "within tolerance", "ok": "ok"}
CODES = {"ok": "o", "tolerated": "t", "findings": "f", "inconclusive": "i", "no_run": "n",
         "not_closed": "c", "running": "r"}
VERDICT_OF = {c: v for v, c in CODES.items()}
RED = ("findings", "inconclusive")
SPANS = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}
MAX_CELLS = 400  # a row never holds more (a 1-minute flow over 30 days is cut to its newest)


@dataclass
class Row:
    flow: str
    owners: list[str]
    cluster: str
    first: int = 0                  # the first slot's start, seconds since the epoch
    step: int = 0                   # the flow's window, in seconds
    codes: str = ""                 # a `CODES` letter per slot, oldest first
    said: dict[int, str] = field(default_factory=dict)     # slot -> its verdict line
    folders: dict[int, str] = field(default_factory=dict)  # slot -> run folder, if off-grid
    newest: str = "no_run"          # the newest closed window's verdict
    red_since: str | None = None    # the start of the unbroken run of red windows, if red now
    red_before_span: bool = False   # that run began before the span shown

    def verdicts(self) -> list[str]:
        return [VERDICT_OF[c] for c in self.codes]

    def start_of(self, slot: int) -> str:
        return iso_z(datetime.fromtimestamp(self.first + slot * self.step, UTC))


def default_span(flows: dict[str, Flow]) -> str:
    """A day of short windows, or a month of daily ones."""
    return "24h" if any(f.window <= timedelta(hours=1) for f in flows.values()) else "30d"


def folder_name(start: int, end: int) -> str:
    """`runfolder.window_folder_name` of a window given in seconds since the epoch."""
    def t(x: int) -> str:
        return datetime.fromtimestamp(x, UTC).strftime("%Y-%m-%dT%H%M%SZ")

    return f"{t(start)}_{t(end)}"


def build(flows: dict[str, Flow], recorded: list[tuple[str, int, int, str, int, str]],
          running: set[tuple[str, str, str]], span: timedelta,
          now: datetime | None = None) -> list[Row]:
    """One row per flow, in name order, with a slot per scheduled window of the span."""
    now = now or datetime.now(UTC)
    now_s, since_s = int(now.timestamp()), int((now - span).timestamp())
    by_flow: dict[str, list[tuple[str, int, int, str, int, str]]] = {}
    for r in recorded:
        by_flow.setdefault(r[0], []).append(r)
    held = {(f, int(parse_instant(s, "lease").timestamp()),
             int(parse_instant(e, "lease").timestamp())) for f, s, e in running}
    rows = []
    for name in sorted(flows):
        flow = flows[name]
        step = int(flow.window.total_seconds())
        first = -(-since_s // step) * step  # the first slot starting at or after `since`
        n = max(0, -(-(now_s - first) // step))
        if n > MAX_CELLS:
            first, n = first + (n - MAX_CELLS) * step, MAX_CELLS
        row = Row(name, list(flow.owners), flow.cluster, first, step)
        codes = ["n"] * n
        closing = int(flow.closing.total_seconds())
        for i in range(n):
            start = first + i * step
            if (name, start, start + step) in held:
                codes[i] = "r"
            elif now_s < start + step + closing:
                codes[i] = "c"
        # the newest recorded run of a slot wins
        for _, start, end, status, tolerated, summary in sorted(by_flow.get(name, ())):
            i = (start - first) // step
            if not 0 <= i < n:
                continue
            verdict = "tolerated" if status == "ok" and tolerated else status
            codes[i] = CODES.get(verdict, "i")
            if summary:
                row.said[i] = summary
            else:
                row.said.pop(i, None)
            if (start, end) != (first + i * step, first + (i + 1) * step):
                row.folders[i] = folder_name(start, end)
            else:
                row.folders.pop(i, None)
        row.codes = "".join(codes)
        _red_since(row)
        rows.append(row)
    return rows


def _red_since(row: Row) -> None:
    """The newest closed window's verdict, and since when the flow has been red."""
    closed = [i for i, c in enumerate(row.codes) if c not in "cr"]
    if not closed:
        return
    row.newest = VERDICT_OF[row.codes[closed[-1]]]
    if row.newest not in RED:
        return
    since = closed[-1]
    for i in reversed(closed):
        if VERDICT_OF[row.codes[i]] not in RED:
            break
        since = i
    else:
        row.red_before_span = True
    row.red_since = row.start_of(since)


def keep(rows: list[Row], owner: str = "", cluster: str = "", status: str = "") -> list[Row]:
    """The rows a filter keeps: an owner's address (or part of it), a cluster, and the
    newest closed window's verdict (`red`: findings or inconclusive)."""
    out = []
    for r in rows:
        if owner and not any(owner.lower() in o.lower() for o in r.owners):
            continue
        if cluster and r.cluster != cluster:
            continue
        if status and not (r.newest in RED if status == "red" else r.newest == status):
            continue
        out.append(r)
    return out
