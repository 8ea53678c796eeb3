"""Step 5, report: the result as HTML (autoescaped: payload text can hold markup) and plain text."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_recon.result.model import Cause, Finding, Result
from kafka_recon.runfiles.outcomes import Validation
from kafka_recon.runfiles.repair import RepairDelivery, RepairPlan
from kafka_recon.runfolder import RunFolder, remove, write_bytes, write_text
from kafka_recon.settings import ui_url
from kafka_recon.window import parse_instant

if TYPE_CHECKING:
    from upath import UPath


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


LEADS = {"likely": "Most likely because", "possible": "Possibly because"}


def why(cause: Cause | str | None) -> str:
    """The cause's sentence, right after its finding's: summary, evidence, fix."""
    if not isinstance(cause, Cause):
        return ""
    evidence = "; ".join(cause.evidence)
    if cause.confidence in LEADS:
        return (f" {LEADS[cause.confidence]} {cause.summary}"
                + (f": {evidence}" if evidence else "") + f". Fix: {cause.fix}")
    return f" Cause unknown: {cause.summary}" + (f" ({evidence})" if evidence else "") + "."


def sentences(result: Result) -> list[str]:
    """Each finding in one sentence, the answer an owner reads first."""
    out = []
    for f in result.record_findings:  # the audit has a section of its own
        if f.kind == "volume":
            out.append(volume_sentence(result, f))
            continue
        if f.kind == "freshness":
            verdict = "reported, the window stays ok (freshness check: warn)" \
                if f.within_tolerance else "the window fails (freshness check: fail)"
            out.append(f"{result.flow}: {f.hop} stopped: {f.why}; {verdict}.")
            continue
        where = f.hop.replace("->", " and ")
        between = "between " if "->" in f.hop else "at "
        tol = ""
        if f.words.failure and f.allowed:  # a tolerance that lets records through says how many
            tol = (f" (within its tolerance of {f.allowed})" if f.within_tolerance
                   else f" (beyond its tolerance of {f.allowed})")
        elif f.within_tolerance and f.words.failure:
            tol = " (within tolerance)"
        out.append(f"{result.flow}: {f.count} records {f.words.sentence} "
                   f"on the {f.side} side {between}{where}"
                   f"{when(f.buckets, result.bucket_seconds)}{tol}.{why(f.cause)}")
    return out


def volume_sentence(result: Result, f: Finding) -> str:
    """"orders_db held 612 records between 10:00 and 12:00; its history expects 1,800 to
    2,400 there (the same hour on 27 days): too few." """
    span = ""
    if f.buckets and result.bucket_seconds:
        step = timedelta(seconds=result.bucket_seconds)
        first = parse_instant(f.buckets[0], "a volume finding")
        last = parse_instant(f.buckets[-1], "a volume finding") + step
        fmt = "%H:%M" if first.date() == (last - timedelta(microseconds=1)).date() \
            else "%Y-%m-%d %H:%M"
        span = f" between {first:{fmt}} and {last:{fmt}}"
    low, high = f.band or (0, 0)
    verdict = "reported, the window stays ok (volume check: warn)" if f.within_tolerance \
        else "the window fails (volume check: fail)"
    return (f"{result.flow}: {f.hop} held {f.count:,} records{span}; its history expects "
            f"{low:,} to {high:,} there ({f.why}): {f.direction}, {verdict}.")


PREVIEW_IDS = 10


def id_files(result: Result) -> list[dict[str, Any]]:
    """Every id file the result names: what it holds and where, relative to the run folder."""
    files: list[dict[str, Any]] = []
    for h in result.hops:
        for what, path, count in (("missing", h.missing_ids, h.missing),
                                  ("duplicate", h.duplicate_ids, h.duplicate),
                                  ("unexpected", h.unexpected_ids, h.unexpected),
                                  # declared drops: shown for audit, never a finding
                                  ("filtered on purpose", h.filtered_ids, h.filtered or 0),
                                  # routed to a sink connector's dead-letter queue
                                  ("dead-lettered", h.dead_lettered_ids,
                                   h.dead_lettered or 0)):
            if path and count:
                files.append({"hop": h.name, "what": what, "path": path, "count": count})
    for f in result.findings:
        if f.kind in ("late", "unidentifiable") and f.ids:
            files.append({"hop": f.hop, "what": f.kind, "path": f.ids, "count": f.count})
    return files


def preview(path: Path | UPath, n: int = PREVIEW_IDS, columns: int | None = None
            ) -> list[str]:
    """The first n rows of an id file, its first `columns` columns (all: None) joined (id, or
    id and extra copies)."""
    import csv

    if not path.exists():
        return []
    rows = []
    with path.open("r", newline="") as fh:
        for i, row in enumerate(csv.reader(fh)):
            if i == 0:
                continue  # header
            if i > n:
                break
            rows.append(" ".join(row[:columns]))
    return rows


def links(result: Result, folder: RunFolder, docs: str | None) -> dict[str, str] | None:
    """Web addresses of the window's page, the report and the validation on the plugin's
    pages, when Airflow's address is known.

    `settings.ui_url` is the Airflow address owners reach (e.g. http://airflow:8080); the
    plugin shows each window at /recon/windows/<flow>/<window> and serves every run folder
    under /recon/runs/<flow>/<window>/.
    """
    base = ui_url()
    if not base:
        return None
    root = f"{base.rstrip('/')}/recon"
    where = f"{root}/runs/{result.flow}/{folder.path.name}"
    window = f"{root}/windows/{result.flow}/{folder.path.name}"
    # the validation as the plugin renders it (offline, no CDN); Data Docs stay in the folder
    return {"window": window, "report": f"{where}/{folder.report.name}",
            "validation": f"{window}/validation" if docs else ""}


def _nothing_for_none(value: Any) -> Any:
    return "" if value is None else value


def render_report(result: Result, folder: RunFolder,
                  validation: Validation | None = None) -> dict[str, str]:
    """Write report.html (chart embedded), mail.html (chart as cid:), report.txt and chart.png.

    The answer comes first: status and one sentence per finding; then the chart with the gaps
    marked, the hops, the first ids of each id file, the replays, the audit and the validation.
    """
    import base64

    from jinja2 import Environment, PackageLoader, select_autoescape

    from kafka_recon.outputs.chart import run_chart

    as_json = result.as_json()  # the templates and the chart read the contract's JSON form
    from kafka_recon.runfiles.bands import Bands

    bands = folder.read_if(Bands)
    png = run_chart(as_json, [b.as_json() for b in bands.bands] if bands else None) \
        if any(t.buckets for t in result.tiers) else None
    chart = folder.file("chart")
    if png:
        write_bytes(chart, png)
    else:
        remove(chart)  # a re-run without buckets must not show the old chart
    # a value a run does not have (a counts-only tier's distinct ids) is said as nothing,
    # never as 'None'
    env = Environment(loader=PackageLoader("kafka_recon", "templates"),
                      autoescape=select_autoescape(["html", "j2"], default=True),
                      finalize=_nothing_for_none)
    text_env = Environment(loader=PackageLoader("kafka_recon", "templates"), autoescape=False,
                           finalize=_nothing_for_none)
    risks = [f.as_json() for f in result.risks]
    # a dead-lettered id's file also holds its error and offsets: the preview shows the ids
    files = [{**f, "first": preview(folder.inside(f["path"]),
                                    columns=1 if f["what"] == "dead-lettered" else None)}
             for f in id_files(result)]
    docs = validation.data_docs if validation else None
    plan = folder.read_if(RepairPlan)
    delivery = folder.read_if(RepairDelivery)
    ctx = {"r": as_json, "sentences": sentences(result),
           "repair": plan.as_json() if plan else None,
           "delivered": ({d.hop: d.as_json() for d in delivery.hops}
                         if delivery and plan and delivery.plan_digest == plan.digest
                         else None),
           "delivered_at": delivery.delivered_at if delivery else None,
           "repair_earlier": plan is not None and plan.result_digest != folder.result_digest(),
           # the window after its repair: each planned hop's missing records in this result
           "missing_now": {f"{h['from']}->{h['to']}": h["missing"] for h in as_json["hops"]},
           "validation": validation.as_json() if validation else None,
           # each suite's failures in words (an older validation.json's too)
           "failed": {name: [f.said for f in s.failed]
                      for name, s in (validation.suites.items() if validation else ())},
           "risks": risks, "id_files": files, "preview_n": PREVIEW_IDS,
           "data_docs": folder.relative(docs) if docs else None,
           "links": links(result, folder, docs)}
    paths = {"html": folder.file("report_html"), "mail": folder.file("mail_html"),
             "text": folder.file("report_txt")}
    template = env.get_template("report.html.j2")
    inline = f"data:image/png;base64,{base64.b64encode(png).decode()}" if png else None
    write_text(paths["html"], template.render(**ctx, chart_src=inline, for_mail=False))
    write_text(paths["mail"], template.render(**ctx, chart_src=f"cid:{chart.name}" if png
                                              else None, for_mail=True))
    write_text(paths["text"], text_env.get_template("report.txt.j2").render(**ctx))
    out = {k: str(v) for k, v in paths.items()}
    if png:
        out["chart"] = str(chart)
    return out

