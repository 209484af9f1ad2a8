"""Docstrings and comments cite the user documentation as ``docs/PAGE.md#anchor``; each citation
must name a page the site has and a heading on it, and nothing may cite the notes that are not
part of the repository (``spec/*.md``, ``DESIGN.md``)."""

from __future__ import annotations

import re

from docs_support import ROOT, anchors, page_text

CITATION = re.compile(r"docs/((?:[\w-]+/)*[\w-]+\.md)(?:#([\w-]+))?")
ABSENT_NOTES = re.compile(r"\bspec/\w+\.md|\bDESIGN\.md|\bseeds/[\w-]+\.md")


def _sources() -> list[tuple[str, int, str]]:
    lines = []
    for path in sorted((ROOT / "lev_nb").rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            lines.append((f"{path.relative_to(ROOT)}:{number}", number, line))
    return lines


def test_the_code_cites_the_documentation() -> None:
    cited = [m for _, _, line in _sources() for m in CITATION.finditer(line)]
    assert len(cited) >= 100  # the docstrings point readers at the site


def test_every_citation_names_a_page_and_a_heading_that_exist() -> None:
    broken = []
    for where, _, line in _sources():
        for match in CITATION.finditer(line):
            page, anchor = match.groups()
            text = page_text(page)
            if text is None:
                broken.append(f"{where}: docs/{page} is not a page of the site")
            elif anchor and anchor not in anchors(text):
                broken.append(f"{where}: docs/{page} has no heading #{anchor}")
    assert not broken, "\n".join(broken)


def test_nothing_cites_notes_outside_the_repository() -> None:
    stale = [f"{where}: {line.strip()}" for where, _, line in _sources() if ABSENT_NOTES.search(line)]
    assert not stale, "\n".join(stale)


def test_a_broken_citation_is_caught() -> None:
    """The check itself: a missing page and a missing heading are both reported."""
    assert page_text("no-such-page.md") is None
    assert "the-run-record" in anchors(page_text("runs.md") or "")
    assert "no-such-heading" not in anchors(page_text("runs.md") or "")
    assert "bp-stage" in anchors(page_text("reference/blueprint.md") or "")
    assert "lev-run" in anchors(page_text("reference/cli.md") or "")
