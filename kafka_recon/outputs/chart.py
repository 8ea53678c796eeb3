"""Charts as PNG bytes: records per bucket for every tier of a run, a flow's history.

matplotlib is imported inside the functions (Agg backend, no display): DAG files and the plugin
import this module's callers at parse time.
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


def _figure(width: float = 9, height: float = 3.6) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(width, height), dpi=100)
    ax.grid(True, alpha=0.3)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return fig, ax


def _png(fig: Any) -> bytes:
    from matplotlib import pyplot as plt

    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    plt.close(fig)
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


def run_chart(result: dict[str, Any]) -> bytes:
    """Records per bucket for every tier; buckets where records went missing are marked red."""
    from matplotlib import dates as mdates

    step = timedelta(seconds=result.get("bucket_seconds") or 3600)
    fig, ax = _figure()
    for t in result["tiers"]:
        b = t.get("buckets") or {}
        if not b:
            continue
        xs = [_t(k) for k in sorted(b)]
        ax.step(xs + [xs[-1] + step], [b[k] for k in sorted(b)] + [b[sorted(b)[-1]]],
                where="post", label=t["name"], linewidth=1.6)
    marked = gaps(result)
    for bucket, g in sorted(marked.items()):
        x0 = _t(bucket)
        color = _LOSS if g["missing"] else _DUP
        ax.axvspan(x0, x0 + step, color=color, alpha=0.18, linewidth=0)
        words = [f"-{g['missing']}" if g["missing"] else "", f"+{g['duplicate']} dup"
                 if g["duplicate"] else ""]
        ax.annotate(" ".join(w for w in words if w), xy=(x0 + step / 2, 1.0),
                    xycoords=("data", "axes fraction"), ha="center", va="bottom",
                    color=color, fontsize=8, fontweight="bold")
    ax.set_ylabel(f"records per {_duration(step)}")
    ax.set_ylim(bottom=0)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M", tz=UTC))
    fig.autofmt_xdate()
    title = f"{result['flow']}: records per bucket"
    if marked:
        title += " (red: records missing)"
    ax.set_title(title, fontsize=10, loc="left")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="lower left")
    return _png(fig)


def history_chart(flow: str, rows: list[dict[str, Any]]) -> bytes:
    """Per window: records at each tier (lines) and records missing (red bars)."""
    return _png(history_figure(flow, rows)[0])


def history_figure(flow: str, rows: list[dict[str, Any]]) -> tuple[Any, Any]:
    """The history chart's figure and axes (what `history_chart` renders): one point per
    window and tier, labelled by what tells windows apart (days, hours or minutes)."""
    fig, ax = _figure(9, 3.2)
    rows = sorted(rows, key=lambda r: r["window_start"])
    xs = [_t(r["window_start"]) for r in rows]
    tiers = sorted({t for r in rows for t in r.get("tiers", {})})
    for tier in tiers:
        # not clipped: a window of zero records is a point on the axis, not under it
        ax.plot(xs, [r.get("tiers", {}).get(tier, 0) for r in rows], marker="o",
                markersize=4, label=tier, clip_on=False, zorder=3)
    # a window's length in days: bars as wide as 60% of it, and room for one window each side
    span = (_t(rows[0]["window_end"]) - xs[0]).total_seconds() / 86400 if rows else 1.0
    if xs:
        ax.set_xlim(xs[0] - timedelta(days=span), xs[-1] + timedelta(days=span))
    if any(r.get("missing") for r in rows):
        ax2 = ax.twinx()
        ax2.bar(xs, [r.get("missing", 0) for r in rows], color=_LOSS, alpha=0.5,
                width=0.6 * span, label="missing")
        ax2.set_ylabel("missing", color=_LOSS)
        ax2.set_ylim(bottom=0)
    for x, r in zip(xs, rows, strict=True):
        if r["status"] == "inconclusive":
            ax.axvline(x, color="#bbbbbb", linestyle=":")
    from matplotlib import dates as mdates

    # ticks where windows are, labelled at their scale: a date for daily windows, the hour or
    # minute for shorter ones (the date once, in the offset), never one date nine times
    locator = mdates.AutoDateLocator(tz=UTC, minticks=3, maxticks=9)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=UTC))
    ax.set_title(f"{flow}: records per window (UTC)", fontsize=10, loc="left")
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # records are whole
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
