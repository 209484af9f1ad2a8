"""Output format labels: the formats lev_nb knows by name, and the one rule that tells a misspelling
of one of them from a label of the author's own (docs/concepts.md#final-outputs).

A format is an open label: "markdown, XML, CSV, a2ui, a media type, or a format you invent this
afternoon all work the same way", and a label lev_nb has no check for is carried through unchecked.
So an unknown label is never an error by itself. What is an error is a label one keystroke away
from a format lev_nb knows (``cvs``, ``jsno``, ``xlm``, ``mardkown``): the author meant the known
format, and without this rule the answer would silently go unchecked. ``lev validate`` (lint
``output-format-typo``) and the run-start checks (:func:`lev_nb.engine.launch.check_launch`) both
use :func:`format_typo`, so a blueprint and a launch request are judged alike.
"""

from __future__ import annotations

__all__ = ["KNOWN_FORMATS", "format_typo", "normalise"]

# The formats lev_nb knows by name: the ones it checks for well-formedness, and markdown.
KNOWN_FORMATS: tuple[str, ...] = ("json", "xml", "yaml", "csv", "toml", "markdown")

# Labels that are right as written: aliases lev_nb reads as a known format, and real formats that
# happen to sit one keystroke from one (tsv is not a misspelt csv, nor jsonl a misspelt json).
_ACCEPTED: frozenset[str] = frozenset({
    "yml", "md", "text", "txt", "plain", "html", "htm",
    "tsv", "psv", "jsonl", "ndjson", "json5", "jsonc", "hjson", "cson", "bson", "geojson",
    "jsonp", "kml", "uml", "mml", "qml", "vml", "xsl", "xslt", "xsd", "sml", "rmarkdown", "cs",
})


def normalise(label: str) -> str:
    """A format label as lev_nb compares it: trimmed and lower-cased."""
    return label.strip().lower()


def _distance(a: str, b: str) -> int:
    """Edit distance counting a swap of two neighbouring letters as one edit (``cvs`` -> ``csv``)."""
    rows = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) + 1):
        rows[i][0] = i
    for j in range(len(b) + 1):
        rows[0][j] = j
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            rows[i][j] = min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                rows[i][j] = min(rows[i][j], rows[i - 2][j - 2] + 1)
    return rows[len(a)][len(b)]


def format_typo(label: str | None) -> str | None:
    """The known format ``label`` looks like a misspelling of, or None when it is fine as written.

    Fine as written: a known format (any case), an accepted alias or neighbour, a media type or any
    label with ``/``, ``+`` or ``.`` in it, and every label that is not within one edit (two for
    ``markdown``) of a known format.
    """
    if label is None:
        return None
    text = normalise(label)
    if not text or text in KNOWN_FORMATS or text in _ACCEPTED or any(c in text for c in "/+. "):
        return None
    for known in KNOWN_FORMATS:
        allowed = 2 if len(known) > 5 else 1
        if _distance(text, known) <= allowed:
            return known
    return None
