"""Charts as PNG bytes: records per bucket for every tier of a run, a flow's history.

matplotlib is imported inside the functions (a bare Figure, drawn by Agg, no display): DAG files
and the plugin import this module's callers at parse time.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from typing import Any

from kafka_recon.window import parse_instant

_LOSS = "#d62728"
_DUP = "#ff7f0e"


def _t(iso: str) -> datetime:
    return parse_instant(iso, "chart")


def _figure(width: float = 9, height: float = 3.6, gaps_panel: bool = False
            ) -> tuple[Any, Any, Any]:
    """A figure with the records' panel and, with `gaps_panel`, a smaller one below it on the
    same time axis for the missing and duplicate records: each count on a scale of its own
    meaning, never two unrelated y axes on one panel."""
    # a Figure of its own, not pyplot's: no backend to choose, no figure kept in a global
    # registry to close, and a third of a second less to import on every run's report
    from matplotlib.figure import Figure

    if gaps_panel:
        fig = Figure(figsize=(width, height * 1.35), dpi=100)
        ax, low = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1.3]})
    else:
        fig = Figure(figsize=(width, height), dpi=100)
        ax, low = fig.subplots(), None
    for a in (ax, low):
        if a is None:
            continue
        a.grid(True, alpha=0.3)
        for side in ("top", "right"):
            a.spines[side].set_visible(False)
    return fig, ax, low


# tiers often agree exactly: each is drawn thinner and dashed differently over the one before,
# so a tier under another still shows
_STYLES = [("-", 3.2), ("--", 2.2), (":", 1.8), ("-.", 1.4)]


def _tier_style(i: int) -> dict[str, Any]:
    style, width = _STYLES[i % len(_STYLES)]
    return {"linestyle": style, "linewidth": width, "zorder": 3 + i}


def _gap_bars(low: Any, xs: list[datetime], missing: list[int], duplicate: list[int],
              width: timedelta, unit: str) -> None:
    """Missing records (red) and duplicates (orange) side by side, each bar labelled."""
    both = any(missing) and any(duplicate)
    half = width / 2 if both else width
    for values, color, label, shift in ((missing, _LOSS, "missing", -half / 2),
                                        (duplicate, _DUP, "duplicate", half / 2)):
        if not any(values):
            continue
        shift = shift if both else width * 0
        bars = low.bar([x + shift for x in xs], values, width=half, color=color, label=label,
                       align="center")
        low.bar_label(bars, labels=[str(v) if v else "" for v in values], fontsize=7,
                      color=color, padding=1)
    low.set_ylabel(f"records per {unit}", fontsize=8)
    top = max([1, *missing, *duplicate])
    low.set_ylim(0, top * 1.35)  # room for the labels above the tallest bar
    from matplotlib.ticker import MaxNLocator

    low.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=3))
    low.legend(fontsize=8, loc="upper left", ncols=2, frameon=False)


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")  # a bare Figure draws with Agg, matplotlib's own
    return buf.getvalue()


def gaps(result: dict[str, Any]) -> dict[str, dict[str, int]]:
    """{bucket: {"missing": n, "duplicate": n}} summed over hops, only buckets with a gap."""
    out: dict[str, dict[str, int]] = {}
    for h in result["hops"]:
        for b in h.get("buckets", []):
            if b["missing"] or b["duplicate"]:
                g = out.setdefault(b["bucket"], {"missing": 0, "duplicate": 0})
                g["missing"] += b["missing"]
                g["duplicate"] += b["duplicate"]
    return out


def _buckets(result: dict[str, Any], step: timedelta) -> list[str]:
    """Every bucket start of the window, as the result's keys spell them (none when the
    result says no window)."""
    from kafka_recon.window import iso_z

    window = result.get("window") or {}
    if not window.get("start") or not window.get("end"):
        return []
    t, end = _t(window["start"]), _t(window["end"])
    out: list[str] = []
    while t < end and len(out) < 10_000:
        out.append(iso_z(t))
        t += step
    return out


def run_chart(result: dict[str, Any], bands: list[dict[str, Any]] | None = None) -> bytes:
    """Records per bucket for every tier (above), each over the band its history expects
    (`bands`: bands.json's rows, shaded in the tier's colour) and, where records went missing
    or were duplicated, those records per bucket (below, on their own scale)."""
    from matplotlib import dates as mdates

    step = timedelta(seconds=result.get("bucket_seconds") or 3600)
    marked = gaps(result)
    fig, ax, low = _figure(gaps_panel=bool(marked))
    # every bucket of the window, an empty one at zero: a silent stretch must show as one
    grid = _buckets(result, step)
    shaded: dict[tuple[tuple[int, int], ...], list[str]] = {}
    for i, t in enumerate(t for t in result["tiers"] if t.get("buckets")):
        b = t["buckets"]
        keys = grid or sorted(b)
        xs = [_t(k) for k in keys]
        values = [b.get(k, 0) for k in keys]
        line = ax.step(xs + [xs[-1] + step], values + [values[-1]], where="post",
                       label=t["name"], **_tier_style(i))[0]
        mine = sorted((r for r in bands or [] if r["tier"] == t["name"]),
                      key=lambda r: r["bucket"])
        same = tuple((r["low"], r["high"]) for r in mine)
        if same in shaded:  # tiers that usually agree share one shading, named for all
            shaded[same].append(t["name"])
            continue
        if mine:
            shaded[same] = [t["name"]]
            bx = [_t(r["bucket"]) for r in mine]
            ax.fill_between(bx + [bx[-1] + step], [r["low"] for r in mine] + [mine[-1]["low"]],
                            [r["high"] for r in mine] + [mine[-1]["high"]], step="post",
                            color=line.get_color(), alpha=0.15, linewidth=0, zorder=1,
                            label=f"usual range of {t['name']}")
    for handle in ax.collections:  # name every tier a shared shading stands for
        names = next((v for v in shaded.values() if f"usual range of {v[0]}" ==
                      handle.get_label()), None)
        if names and len(names) > 1:
            handle.set_label(f"usual range of {', '.join(names)}")
    ax.set_ylabel(f"records per {_duration(step)}")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{result['flow']}: records per bucket (UTC)", fontsize=10, loc="left")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="lower left")
    if low is not None:
        at = sorted(marked)
        _gap_bars(low, [_t(b) + step / 2 for b in at], [marked[b]["missing"] for b in at],
                  [marked[b]["duplicate"] for b in at], step * 0.8, _duration(step))
    bottom = low if low is not None else ax
    bottom.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M", tz=UTC))
    fig.autofmt_xdate()
    return _png(fig)


def history_chart(flow: str, rows: list[dict[str, Any]]) -> bytes:
    """Per window: records at each tier (lines) and records missing (red bars)."""
    return _png(history_figure(flow, rows)[0])


def history_figure(flow: str, rows: list[dict[str, Any]]) -> tuple[Any, Any]:
    """The history chart's figure and records' axes (what `history_chart` renders): one point
    per window and tier, labelled by what tells windows apart (days, hours or minutes); the
    missing records per window in a panel of their own below."""
    rows = sorted(rows, key=lambda r: r["window_start"])
    xs = [_t(r["window_start"]) for r in rows]
    missing = [int(r.get("missing") or 0) for r in rows]
    duplicate = [int(r.get("duplicate") or 0) for r in rows]
    fig, ax, low = _figure(9, 3.2, gaps_panel=any(missing) or any(duplicate))
    tiers = list(dict.fromkeys(t for r in rows for t in r.get("tiers", {})))  # flow order
    for i, tier in enumerate(tiers):
        # not clipped: a window of zero records is a point on the axis, not under it
        ax.plot(xs, [r.get("tiers", {}).get(tier, 0) for r in rows], marker="o",
                markersize=4, label=tier, clip_on=False, **_tier_style(i))
    # a window's length in days: bars as wide as 60% of it, and room for one window each side
    span = (_t(rows[0]["window_end"]) - xs[0]).total_seconds() / 86400 if rows else 1.0
    if xs:
        ax.set_xlim(xs[0] - timedelta(days=span), xs[-1] + timedelta(days=span))
    if low is not None:
        _gap_bars(low, xs, missing, duplicate, timedelta(days=0.6 * span), "window")
    for x, r in zip(xs, rows, strict=True):
        if r["status"] == "inconclusive":
            ax.axvline(x, color="#bbbbbb", linestyle=":", label=None)
    from matplotlib import dates as mdates

    # ticks where windows are, labelled at their scale: a date for daily windows, the hour or
    # minute for shorter ones (the date once, in the offset), never one date nine times
    bottom = low if low is not None else ax
    locator = mdates.AutoDateLocator(tz=UTC, minticks=3, maxticks=9)
    bottom.xaxis.set_major_locator(locator)
    bottom.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=UTC))
    ax.set_title(f"{flow}: records per window (UTC)", fontsize=10, loc="left")
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # records are whole
    ax.set_ylabel("records per window", fontsize=8)
    ax.set_ylim(bottom=0, top=max([1, *(n for r in rows for n in r.get("tiers", {}).values())])
                * 1.1)
    if tiers:
        ax.legend(fontsize=8, loc="lower left")
    return fig, ax


def _duration(step: timedelta) -> str:
    s = int(step.total_seconds())
    for unit, n in (("d", 86400), ("h", 3600), ("min", 60)):
        if s % n == 0:
            return f"{s // n}{unit}" if s // n != 1 else {"d": "day", "h": "hour",
                                                          "min": "minute"}[unit]
    return f"{s}s"
