"""What the documentation tests share: where the site's sources are, the generated pages, and the
anchors each page defines (the ids MkDocs gives its headings)."""

from __future__ import annotations

import importlib.util
import re
from functools import cache
from pathlib import Path
from types import ModuleType

from markdown.extensions.toc import slugify

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*(?:\{#([\w-]+)\})?\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


@cache
def reference_hook() -> ModuleType:
    """docs/hooks/reference.py, the MkDocs hook that generates the reference pages."""
    spec = importlib.util.spec_from_file_location("lev_docs_reference_hook", DOCS / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def page_text(page: str) -> str | None:
    """The Markdown of a page (``concepts.md``, ``reference/cli.md``), generated or written; None
    when the site has no such page."""
    hook = reference_hook()
    generators = {
        "reference/blueprint.md": hook.blueprint_reference,
        "reference/configuration.md": hook.configuration_reference,
        "reference/cli.md": hook.cli_reference,
    }
    if page in generators:
        return generators[page]()
    path = DOCS / page
    return path.read_text(encoding="utf-8") if path.is_file() and "hooks" not in path.parts else None


def anchors(text: str) -> set[str]:
    """The ids of a page's headings: an explicit ``{#id}``, else the slug MkDocs' toc makes of the
    heading's text (code spans and links reduced to their text)."""
    found: set[str] = set()
    in_fence = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        match = None if in_fence else _HEADING.match(line)
        if match is None:
            continue
        if match.group(3):
            found.add(match.group(3))
            continue
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", match.group(2)).replace("`", "")
        found.add(slugify(title, "-"))
    return found
