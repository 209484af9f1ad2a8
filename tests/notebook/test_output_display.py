"""How a final output displays in a notebook: by its format, always with a text/plain fallback."""

from __future__ import annotations

import json

import pytest
from lxml import etree

from lev_nb.engine.pipeline.outputs import FinalOutput
from lev_nb.notebook.display import csv_table_html, output_bundle, pretty_xml


def output(content: str, fmt: str | None, **kw) -> FinalOutput:
    return FinalOutput(content=content, format=fmt, stage="summary", submitted_at="2026-01-01T00:00:00.000Z", **kw)


def test_json_displays_as_application_json_with_a_plain_fallback():
    content = '{"findings": [{"file": "a.py", "severity": "high"}], "count": 1}'
    bundle = output(content, "json")._repr_mimebundle_()
    assert bundle["application/json"] == json.loads(content)
    assert bundle["text/plain"].endswith(content)
    assert "Final output (json) from stage 'summary'" in bundle["text/plain"]
    assert set(bundle) == {"application/json", "text/plain"}


def test_json_that_does_not_parse_falls_back_to_text_only():
    bundle = output_bundle("{broken", "json")
    assert bundle == {"text/plain": "{broken"}


@pytest.mark.parametrize("label", ["markdown", "Markdown", " md "])
def test_markdown_displays_as_text_markdown(label):
    content = "# Findings\n\n- one\n- two\n"
    bundle = output(content, label)._repr_mimebundle_()
    assert bundle["text/markdown"].endswith(content)
    assert bundle["text/plain"].endswith(content)
    assert set(bundle) == {"text/markdown", "text/plain"}


def test_xml_is_pretty_printed_in_text_plain():
    content = '<report><finding severity="high"><file>a.py</file></finding></report>'
    bundle = output_bundle(content, "xml", "heading")
    assert set(bundle) == {"text/plain"}
    text = bundle["text/plain"]
    assert text.startswith("heading\n\n")
    body = text[len("heading\n\n"):]
    assert body.splitlines() == [
        "<report>",
        '  <finding severity="high">',
        "    <file>a.py</file>",
        "  </finding>",
        "</report>",
    ]
    # Re-indenting changes only whitespace between elements.
    parser = etree.XMLParser(remove_blank_text=True)
    assert etree.tostring(etree.fromstring(body, parser)) == etree.tostring(etree.fromstring(content, parser))


def test_malformed_xml_is_shown_as_written():
    assert output_bundle("<a><b></a>", "xml") == {"text/plain": "<a><b></a>"}
    assert pretty_xml("<a><b></a>") is None


def test_csv_displays_as_an_html_table():
    content = 'name,note\nalpha,"has, a comma"\nbeta,<b>bold?</b>\n'
    bundle = output(content, "csv")._repr_mimebundle_()
    html = bundle["text/html"]
    assert "<table>" in html
    assert "<thead><tr><th>name</th><th>note</th></tr></thead>" in html
    assert "<tr><td>alpha</td><td>has, a comma</td></tr>" in html
    assert "<td>&lt;b&gt;bold?&lt;/b&gt;</td>" in html  # cells are escaped
    assert bundle["text/plain"].endswith(content)


def test_a_long_csv_table_is_capped_with_a_note():
    content = "n\n" + "".join(f"{i}\n" for i in range(600))
    html = csv_table_html(content)
    assert html.count("<tr>") == 1 + 500
    assert "100 more rows" in html


def test_an_empty_csv_has_no_table():
    assert csv_table_html("") is None
    assert output_bundle("\n", "csv") == {"text/plain": "\n"}


@pytest.mark.parametrize("label", [None, "text", "a2ui", "yaml", "text/vnd.acme+xml"])
def test_anything_else_is_plain_text(label):
    bundle = output("some: answer\n", label)._repr_mimebundle_()
    assert set(bundle) == {"text/plain"}
    assert bundle["text/plain"].endswith("some: answer\n")


def test_a_truncated_answer_says_so_in_its_heading():
    bundle = output("abc", None, truncated=True)._repr_mimebundle_()
    assert bundle["text/plain"].startswith("Final output from stage 'summary' [truncated]")


def test_str_of_an_output_is_its_content():
    assert str(output("exactly this", "markdown")) == "exactly this"


def test_ipython_picks_the_bundle_up(tmp_path):
    """IPython's display formatter uses _repr_mimebundle_, so run.result shows richly in a cell."""
    formatters = pytest.importorskip("IPython.core.formatters")
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    data, _ = shell.display_formatter.format(output('{"a": 1}', "json"))
    assert data["application/json"] == {"a": 1}
    assert data["text/plain"].endswith('{"a": 1}')
    assert formatters is not None


def test_absurdly_nested_json_falls_back_to_text():
    content = "[" * 50_000
    assert output_bundle(content, "json") == {"text/plain": content}


def test_a_csv_with_a_huge_field_still_displays():
    content = "a,b\n1," + "x" * 200_000 + "\n"
    bundle = output_bundle(content, "csv")
    assert bundle["text/plain"] == content
