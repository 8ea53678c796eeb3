"""The documentation stands alone: the site builds in strict mode, the README is a front page
that points at it, and no document refers to a file outside the repository."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_recon.settings import REPO_ROOT

pytestmark = pytest.mark.unit

DOCUMENTS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md")),
             REPO_ROOT / "expectations" / "README.md"]


def test_the_docs_site_builds_in_strict_mode(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                           "--site-dir", str(tmp_path / "site")], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    for page in ("index", "design", "install", "reference/flow-config", "reference/result"):
        assert (tmp_path / "site" / page / "index.html").is_file() or page == "index", page
    assert (tmp_path / "site" / "index.html").is_file()


def test_every_docs_page_is_in_the_site_navigation() -> None:
    nav = (REPO_ROOT / "mkdocs.yml").read_text()
    pages = {str(p.relative_to(REPO_ROOT / "docs")) for p in (REPO_ROOT / "docs").rglob("*.md")}
    assert {p for p in pages if p not in nav} == set()


def test_the_readme_is_a_front_page_under_250_lines_that_points_at_the_docs() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 250
    for section in ("## Two commands", "## What the demo shows", "## Where to go next"):
        assert section in readme
    linked = set(re.findall(r"\]\((docs/[\w/.-]*)\)", readme))
    assert {"docs/design.md", "docs/install.md", "docs/reference/"} <= linked, linked
    assert all((REPO_ROOT / p).exists() for p in linked), linked


def test_no_document_refers_to_a_file_outside_the_repository() -> None:
    outside = re.compile(r"\.\./shared|DESIGN\.md|(?<![\w.])\.\./\.\.")
    found = [f"{d.relative_to(REPO_ROOT)}:{n}" for d in DOCUMENTS
             for n, line in enumerate(d.read_text().splitlines(), 1) if outside.search(line)]
    assert found == []


def test_every_link_within_a_reference_page_names_one_of_its_headings() -> None:
    for page in sorted((REPO_ROOT / "docs" / "reference").glob("*.md")):
        text = page.read_text()
        headings = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
                    for h in re.findall(r"^#+ (.+)$", text, re.M)}
        missing = sorted(set(re.findall(r"\]\(#([^)]+)\)", text)) - headings)
        assert not missing, f"{page.name}: no heading for {missing}"
