"""Step 5, report: the result as HTML (autoescaped: payload text can hold markup) and plain text."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

_WORDS = {"loss": "lost", "duplicate": "duplicated", "unexpected": "found downstream with no "
          "upstream record", "unidentifiable": "without a readable id",
          "replay_unstable": "read differently by replays of the same window",
          "late": "late (arrived inside grace, not lost)"}


def when(buckets: list[str], bucket_seconds: int | None) -> str:
    """', 14:00-15:00' for a few buckets, ', in 7 buckets from 02:00 to 09:00' for more."""
    if not buckets or not bucket_seconds:
        return ""
    starts = [datetime.fromisoformat(b.replace("Z", "+00:00")) for b in sorted(buckets)]
    step = timedelta(seconds=bucket_seconds)
    same_day = starts[0].date() == (starts[-1] + step).date()
    fmt = "%H:%M" if bucket_seconds < 86400 and same_day else \
        "%Y-%m-%d %H:%M" if bucket_seconds < 86400 else "%Y-%m-%d"
    if len(starts) <= 3:
        return ", " + ", ".join(f"{s:{fmt}}-{s + step:{fmt}}" for s in starts)
    return f", in {len(starts)} buckets from {starts[0]:{fmt}} to {starts[-1] + step:{fmt}}"


def sentences(result: dict[str, Any]) -> list[str]:
    """Each finding in one sentence, the answer an owner reads first."""
    out = []
    for f in result["findings"]:
        if f["kind"] in ("config_risk", "health"):
            continue  # the audit has a section of its own
        where = f["hop"].replace("->", " and ")
        between = "between " if "->" in f["hop"] else "at "
        tol = " (within tolerance)" if f.get("within_tolerance") and f["kind"] != "late" else ""
        cause = f" (deleted by retention before group {f['group']} read them)" \
            if f.get("cause") == "retention" else ""
        out.append(f"{result['flow']}: {f['count']} records {_WORDS.get(f['kind'], f['kind'])} "
                   f"on the {f['side']} side {between}{where}"
                   f"{when(f.get('buckets', []), result.get('bucket_seconds'))}{cause}{tol}.")
    return out


def render_report(result: dict[str, Any], out_dir: Path | str,
                  validation: dict[str, Any] | None = None) -> dict[str, str]:
    """Write report.html and report.txt into out_dir; return their paths."""
    from jinja2 import Environment, PackageLoader, select_autoescape

    env = Environment(loader=PackageLoader("kafka_recon", "templates"),
                      autoescape=select_autoescape(["html", "j2"], default=True))
    text_env = Environment(loader=PackageLoader("kafka_recon", "templates"), autoescape=False)
    risks = [f for f in result["findings"] if f["kind"] in ("config_risk", "health")]
    ctx = {"r": result, "sentences": sentences(result), "validation": validation,
           "risks": risks}
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    html = out_dir / "report.html"
    txt = out_dir / "report.txt"
    html.write_text(env.get_template("report.html.j2").render(**ctx))
    txt.write_text(text_env.get_template("report.txt.j2").render(**ctx))
    return {"html": str(html), "text": str(txt)}


def load_json(path: Path | str) -> Any:
    return json.loads(Path(path).read_text())
