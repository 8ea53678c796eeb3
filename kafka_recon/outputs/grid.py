"""The Reconciliation page's grid: every flow by its windows over a span, each window's cell
coloured by its verdict, from one read of the history (`history.windows_between`) and of the
held leases, never a file per cell.

A flow's windows are its schedule's (aligned on its window length from the epoch, as its DAG
schedules them); a window recorded off that grid (an ad-hoc run's) takes the slot its start
falls in. A slot no run recorded is `running` while a run holds its lease, `not_closed` until
its closing time has passed, and `no_run` after that (a missed window is a gap to see, not an
ok)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from kafka_recon.runfolder import window_folder_name
from kafka_recon.window import Window, iso_z, parse_instant

if TYPE_CHECKING:
    from kafka_recon.config import Flow

# every verdict a cell can show, worst first where one must be picked
VERDICTS = {"findings": "findings", "inconclusive": "inconclusive", "no_run": "no run",
            "running": "running", "not_closed": "not yet closed",
            "tolerated": "within tolerance", "ok": "ok"}
RED = ("findings", "inconclusive")
SPANS = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}
MAX_CELLS = 400  # a row never holds more (a 1-minute flow over 30 days is cut to its newest)


@dataclass
class Cell:
    start: str
    end: str
    verdict: str
    title: str          # what hovering says: the window, the verdict and its counts
    folder: str | None  # the run folder's name, for the window's page (a recorded window)


@dataclass
class Row:
    flow: str
    owners: list[str]
    cluster: str
    cells: list[Cell] = field(default_factory=list)
    newest: str = "no_run"          # the newest closed window's verdict
    red_since: str | None = None    # the start of the unbroken run of red windows, if red now
    red_before_span: bool = False   # that run began before the span shown


def default_span(flows: dict[str, Flow]) -> str:
    """A day of short windows, or a month of daily ones."""
    return "24h" if any(f.window <= timedelta(hours=1) for f in flows.values()) else "30d"


def slots(flow: Flow, since: datetime, now: datetime) -> list[tuple[datetime, datetime]]:
    """The flow's scheduled windows that start in [since, now), oldest first."""
    step = flow.window
    seconds = int(step.total_seconds())
    first = datetime.fromtimestamp((int(since.timestamp()) // seconds) * seconds, UTC)
    if first < since:
        first += step
    out = []
    t = first
    while t < now:
        out.append((t, t + step))
        t += step
    return out[-MAX_CELLS:]


def _verdict(run: dict[str, Any]) -> str:
    if run["status"] == "ok" and run.get("tolerated"):
        return "tolerated"
    return str(run["status"])


def build(flows: dict[str, Flow], recorded: list[dict[str, Any]],
          running: set[tuple[str, str, str]], span: timedelta,
          now: datetime | None = None) -> list[Row]:
    """One row per flow, in name order, with a cell per scheduled window of the span."""
    now = now or datetime.now(UTC)
    since = now - span
    by_flow: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(recorded, key=lambda r: (r["window_start"], r["recorded_at"])):
        by_flow.setdefault(r["flow"], []).append(r)
    held = {(f, parse_instant(s, "lease"), parse_instant(e, "lease")) for f, s, e in running}
    rows = []
    for name in sorted(flows):
        flow = flows[name]
        row = Row(name, list(flow.owners), flow.cluster)
        windows = slots(flow, since, now)
        starts = [s for s, _ in windows]
        placed: dict[datetime, dict[str, Any]] = {}
        for r in by_flow.get(name, []):
            t = parse_instant(r["window_start"], "history")
            # the slot this start falls in (the newest recorded run of it wins)
            i = _slot_of(starts, t, flow.window)
            if i is not None:
                placed[starts[i]] = r
        for start, end in windows:
            found = placed.get(start)
            label = f"{iso_z(start)} – {iso_z(end)}"
            if found is not None:
                verdict = _verdict(found)
                window = Window(parse_instant(found["window_start"], "history"),
                                parse_instant(found["window_end"], "history"))
                row.cells.append(Cell(found["window_start"], found["window_end"], verdict,
                                      f"{label}: {VERDICTS[verdict]}. {found['summary']}",
                                      window_folder_name(window)))
                continue
            if (name, start, end) in held:
                verdict = "running"
            elif now < end + flow.closing:
                verdict = "not_closed"
            else:
                verdict = "no_run"
            row.cells.append(Cell(iso_z(start), iso_z(end), verdict,
                                  f"{label}: {VERDICTS[verdict]}", None))
        _red_since(row)
        rows.append(row)
    return rows


def _slot_of(starts: list[datetime], t: datetime, step: timedelta) -> int | None:
    if not starts or t < starts[0] or t >= starts[-1] + step:
        return None
    return min(int((t - starts[0]) / step), len(starts) - 1)


def _red_since(row: Row) -> None:
    """The newest closed window's verdict, and since when the flow has been red."""
    closed = [c for c in row.cells if c.verdict not in ("not_closed", "running")]
    if not closed:
        return
    row.newest = closed[-1].verdict
    if row.newest not in RED:
        return
    since = closed[-1].start
    for c in reversed(closed):
        if c.verdict not in RED:
            break
        since = c.start
    else:
        row.red_before_span = True
    row.red_since = since


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
