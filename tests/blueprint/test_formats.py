"""Output format labels: a misspelling of a format lev_nb knows is told from a label of the author's
own (lev_nb.blueprint.formats), the rule ``lev validate`` and the run-start checks share."""

from __future__ import annotations

import pytest

from lev_nb.blueprint.formats import KNOWN_FORMATS, format_typo


@pytest.mark.parametrize(
    ("label", "meant"),
    [("cvs", "csv"), ("scv", "csv"), ("jsno", "json"), ("josn", "json"), ("jason", "json"), ("jsn", "json"),
     ("xlm", "xml"), ("mxl", "xml"), ("ymal", "yaml"), ("yamll", "yaml"), ("tmol", "toml"), ("tom", "toml"),
     ("mardkown", "markdown"), ("makrdown", "markdown"), ("markdwn", "markdown"), (" CVS ", "csv")],
)
def test_a_label_one_keystroke_from_a_known_format_is_a_misspelling(label: str, meant: str) -> None:
    assert format_typo(label) == meant


@pytest.mark.parametrize(
    "label",
    [*KNOWN_FORMATS, "JSON", " Markdown ", "yml", "md", "text", "txt", "html", "tsv", "jsonl", "ndjson", "json5",
     "a2ui", "nonsense", "text/csv", "application/json", "application/vnd.acme+json", "sql", "svg", "latex", "",
     None],
)
def test_known_formats_aliases_neighbours_and_labels_of_ones_own_are_fine(label: str | None) -> None:
    assert format_typo(label) is None
