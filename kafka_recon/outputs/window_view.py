"""What the Reconciliation page shows of one window: the hop diagram, the findings in words,
and the ids of an id file a page at a time, searched without reading the file whole into
memory (an id file may hold millions of rows, in an object store)."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from typing import Any

from kafka_recon.result.model import Result
from kafka_recon.runfolder import RunFolder

PAGE = 100  # ids a page shows


@dataclass
class Box:
    name: str
    count: int | None
    where: str | None


@dataclass
class Arrow:
    hop: str
    side: str
    missing: int
    duplicate: int
    unexpected: int
    late: int
    bad: bool  # a finding on it counts against the verdict
    dead_lettered: int = 0  # routed to its sink connector's dead-letter queue


@dataclass
class Diagram:
    boxes: list[Box] = field(default_factory=list)
    arrows: list[Arrow] = field(default_factory=list)  # arrows[i] joins boxes[i] and [i + 1]


def diagram(result: Result) -> Diagram:
    """The flow's tiers as boxes with their counts, its hops as the arrows between them."""
    counts = {t.name: t for t in result.tiers}
    out = Diagram()
    if not result.hops:
        out.boxes = [Box(t.name, t.count, t.where) for t in result.tiers]
        return out
    late = {f.hop: f.count for f in result.findings if f.kind == "late"}
    failing = {f.hop for f in result.findings if f.fails}
    names = [result.hops[0].from_, *(h.to for h in result.hops)]
    for name in names:
        t = counts.get(name)
        out.boxes.append(Box(name, t.count if t else None, t.where if t else None))
    for h in result.hops:
        out.arrows.append(Arrow(h.name, h.side, h.missing, h.duplicate, h.unexpected,
                                late.get(h.name, 0), h.name in failing,
                                h.dead_lettered or 0))
    return out


@dataclass
class IdPage:
    file: str           # relative to the run folder
    header: list[str]
    rows: list[list[str]]
    page: int           # from 1
    more: bool          # a next page exists
    query: str
    matched: int | None  # rows matching the query, when it was read to the end


def id_page(folder: RunFolder, rel: str, query: str = "", page: int = 1,
            size: int = PAGE) -> IdPage | None:
    """One page of an id file's rows, the ones whose id contains `query` when given. The file
    is read as a stream, up to the page's last row (to its end only when searching, to count
    the matches). None when `rel` is not an id file of this run folder."""
    path = folder.servable(rel)
    if path is None or not rel.endswith(".csv"):
        return None
    page = max(page, 1)
    first = (page - 1) * size
    rows: list[list[str]] = []
    matched = 0
    more = False
    with path.open("rb") as raw:
        reader = csv.reader(io.TextIOWrapper(raw, encoding="utf-8", newline=""))
        header = next(reader, [])
        for row in reader:
            if query and query not in (row[0] if row else ""):
                continue
            if matched >= first + size:
                more = True
                if not query:
                    break  # the page is full: nothing more to read
            elif matched >= first:
                rows.append(row)
            matched += 1
    return IdPage(rel, header, rows, page, more, query, matched if query else None)


def view(result: Result, folder: RunFolder) -> dict[str, Any]:
    """The window's page, as its template reads it."""
    from kafka_recon.outputs.report import id_files, sentences
    from kafka_recon.runfiles.outcomes import Validation

    validation = folder.read_if(Validation)
    return {"r": result, "diagram": diagram(result), "sentences": sentences(result),
            "id_files": id_files(result), "validation": validation,
            "failed": [f"{name}: {f.said}" for name, s in
                       (validation.suites.items() if validation else ()) for f in s.failed]}
