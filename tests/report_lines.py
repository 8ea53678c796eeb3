"""What a report must never say: a line an owner cannot read for the flow it is about.

Every line of a run's report (its text, its HTML as text, and the mail's HTML) is checked for
what once leaked into them: an empty "as of" for a tier that has no version, a `None`, the
audit's internal `seed` references, Great Expectations' raw expectation names, and any
template value left undefined."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

MEANINGLESS = [
    (re.compile(r"\bNone\b"), "None"),
    (re.compile(r"as of (version|snapshot)\s*(\(|,|$)"), "an empty 'as of'"),
    (re.compile(r"as_of:\s*(in|$)"), "an empty 'as_of:'"),
    (re.compile(r"\bseeds?\b", re.IGNORECASE), "an internal seed reference"),
    (re.compile(r"\bexpect_[a-z_]+"), "a raw expectation name"),
    (re.compile(r"observed\s*\)|\(observed None"), "an empty observation"),
    (re.compile(r"\bundefined\b|\{\{|\}\}"), "a template value left undefined"),
]


class _Text(HTMLParser):
    """An HTML document's text, a line per block (styles and scripts left out)."""

    BLOCKS = {"p", "li", "tr", "h1", "h2", "h3", "div", "br", "table", "ul", "pre"}

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("style", "script"):
            self._skip += 1
        if tag in self.BLOCKS:
            self.parts.append("\n")
        elif tag == "td" or tag == "th":
            self.parts.append(" | ")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script"):
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def html_lines(html: str) -> list[str]:
    parser = _Text()
    parser.feed(html)
    return [" ".join(line.split()) for line in "".join(parser.parts).splitlines()
            if line.strip()]


def report_lines(folder: Path) -> dict[str, list[str]]:
    """The lines of each part of the report a run folder holds."""
    out = {"report.txt": (folder / "report.txt").read_text().splitlines()}
    for name in ("report.html", "mail.html"):
        if (folder / name).exists():
            out[name] = html_lines((folder / name).read_text())
    return out


def meaningless(folder: Path) -> list[str]:
    """Each line of the report that says nothing true of its flow, with what is wrong."""
    return [f"{part}: {what}: {line!r}"
            for part, lines in report_lines(folder).items() for line in lines
            for pattern, what in MEANINGLESS if pattern.search(line)]
