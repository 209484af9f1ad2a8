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


class RecordedRun:
    """A recorded run as ``%lev show RUN`` shows it: the run view's snapshot folded from its
    record, then what the record adds (tokens and cost per stage, warnings, denied tool calls,
    rejected answers). Its ``text/plain`` is what ``lev show`` prints."""

    def __init__(self, story: Any, status: str | None = None) -> None:
        self.story = story
        self.status = status

    def __repr__(self) -> str:
        from lev_nb.explain.show import story_text

        return story_text(self.story, self.status)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/plain": repr(self), "text/html": self._html()}

    def _html(self) -> str:
        from lev_nb.explain.story import format_cost, format_count, format_elapsed
        from lev_nb.notebook.runview import snapshot_html

        story, e = self.story, html.escape
        head = "".join(f"<th style='text-align:left'>{h}</th>" for h in
                       ("stage", "visits", "time", "calls", "tools", "tokens in", "out", "cost"))
        rows = "".join(
            "<tr>" + "".join(f"<td style='text-align:left'>{e(c)}</td>" for c in (
                r.stage, str(r.visits), format_elapsed(r.seconds), str(r.calls), str(r.tool_calls),
                format_count(r.prompt_tokens), format_count(r.completion_tokens),
                format_cost(r.cost_usd, r.prompt_tokens + r.completion_tokens))) + "</tr>"
            for r in story.stages
        )
        parts = [f"<table class='lev-stage-costs'><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
                 if story.stages else ""]
        notes = [(f"[{w.get('code')}] " if w.get("code") else "") + str(w.get("message", "")) for w in story.warnings]
        for title, items in (("Warnings", notes),
                             ("Denied tool calls", [f"{s}: {t}: {why}" for s, t, why in story.denials]),
                             ("Rejected answers", [f"{s}: {why}" for s, why in story.rejections])):
            if items:
                parts.append(f"<div class='lev-callouts'><b>{e(title)} ({len(items)})</b><ul>"
                             + "".join(f"<li>{e(i)}</li>" for i in items) + "</ul></div>")
        return snapshot_html(story.state) + "<div class='lev-record'>" + "".join(parts) + "</div>"
