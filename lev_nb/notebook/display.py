"""Rich notebook displays: a final output, chosen by its format label, and a run (its view's snapshot).

Every bundle carries ``text/plain`` so a console, nbval or a viewer without the richer type still
shows the answer. JSON goes out as ``application/json`` (JupyterLab draws a collapsible tree),
markdown as ``text/markdown``, CSV as an HTML table, XML pretty-printed, anything else as text.
"""

from __future__ import annotations

import csv
import html
import io
import json
from typing import Any

MAX_TABLE_ROWS = 500


def output_bundle(content: str, fmt: str | None, heading: str = "") -> dict[str, Any]:
    """The MIME bundle for an answer ``content`` labelled ``fmt``."""
    label = (fmt or "").strip().lower()
    plain = (heading + "\n\n" if heading else "") + content
    bundle: dict[str, Any] = {"text/plain": plain}
    if label == "json":
        try:
            bundle["application/json"] = json.loads(content)
        except (ValueError, RecursionError):  # not JSON after all: the text/plain view remains
            pass
    elif label in ("markdown", "md"):
        bundle["text/markdown"] = (f"**{html.escape(heading)}**\n\n" if heading else "") + content
    elif label == "csv":
        table = csv_table_html(content)
        if table is not None:
            bundle["text/html"] = (f"<p><b>{html.escape(heading)}</b></p>" if heading else "") + table
    elif label == "xml":
        pretty = pretty_xml(content)
        if pretty is not None:
            bundle["text/plain"] = (heading + "\n\n" if heading else "") + pretty
    return bundle


def csv_table_html(content: str) -> str | None:
    """An HTML table of CSV text (first row as the header), or None when it does not parse."""
    try:
        rows = list(csv.reader(io.StringIO(content)))
    except csv.Error:
        return None
    rows = [r for r in rows if r]
    if not rows:
        return None
    head, body = rows[0], rows[1 : MAX_TABLE_ROWS + 1]
    cells = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    lines = [f"<table><thead><tr>{cells}</tr></thead><tbody>"]
    for row in body:
        lines.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
    lines.append("</tbody></table>")
    if len(rows) - 1 > MAX_TABLE_ROWS:
        lines.append(f"<p>… {len(rows) - 1 - MAX_TABLE_ROWS} more rows</p>")
    return "".join(lines)


def pretty_xml(content: str) -> str | None:
    """``content`` re-indented as XML, or None when it is not well-formed."""
    from lxml import etree

    try:
        root = etree.fromstring(content.strip().encode("utf-8"))
    except etree.XMLSyntaxError:
        return None
    return etree.tostring(root, pretty_print=True, encoding="unicode")


def final_output_bundle(output: Any) -> dict[str, Any]:
    """The MIME bundle of a run's final output, headed by its format and stage."""
    fmt = f" ({output.format})" if output.format else ""
    note = " [truncated]" if output.truncated else ""
    return output_bundle(output.content, output.format, f"Final output{fmt} from stage '{output.stage}'{note}")


def run_summary_bundle(run: Any) -> dict[str, Any]:
    """The MIME bundle of a run handle: the run view's static snapshot (HTML and text)."""
    from lev_nb.notebook.widget import snapshot_bundle

    return snapshot_bundle(run)
