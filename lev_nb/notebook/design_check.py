"""Judge blueprint text written in a notebook, and say what was found, line by line.

:func:`check_text` is what ``%%blueprint`` and the designer widget run on their text: it loads the
text (with ``folder`` as the folder its scripts resolve against) and validates it with
:func:`lev_nb.validate`, so the findings are those ``lev validate`` gives. The :class:`Verdict` adds
the line each finding points at (:mod:`lev_nb.blueprint.finding_lines`) and, for a refused text,
the line and column of the problem with the offending line. Its HTML uses inline styles only, so
it reads the same in an untrusted notebook, nbconvert's HTML and GitHub.
"""

from __future__ import annotations

import html
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lev_nb.blueprint import Blueprint, BlueprintError
from lev_nb.blueprint.report import Finding, Report
from lev_nb.blueprint.finding_lines import finding_line

COLOURS = {"error": "#c62828", "warning": "#b35c00", "note": "#1565c0"}
_MONO = "font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace"
_TOML_PREFIX = "Failed to parse agent.leviath: "
_CELL = "text-align:left;vertical-align:top;padding:2px 8px 2px 0;border:none"


@dataclass
class Located:
    """A finding and the 1-based line of the text it points at (None: the blueprint as a whole)."""

    finding: Finding
    line: int | None


@dataclass
class Verdict:
    """What checking one text found: the report, the blueprint when it loaded, the findings with
    their lines, and for a refused text the problem's line, column and message."""

    text: str
    report: Report
    blueprint: Blueprint | None = None
    findings: list[Located] = field(default_factory=list)
    refusal: str | None = None
    line: int | None = None
    column: int | None = None

    @property
    def usable(self) -> bool:
        """The blueprint loaded and has no errors (warnings and notes do not stop it)."""
        return self.blueprint is not None and self.report.errors == 0

    @property
    def counts(self) -> str:
        """"2 errors, 1 warning" (notes only when there are some)."""
        parts = [_plural(self.report.errors, "error"), _plural(self.report.warnings, "warning")]
        if self.report.notes:
            parts.append(_plural(self.report.notes, "note"))
        return ", ".join(parts)

    def offending_line(self) -> str | None:
        """The text of the line the refusal points at, or None."""
        lines = self.text.splitlines()
        if self.line is None or not 1 <= self.line <= len(lines):
            return None
        return lines[self.line - 1]

    # -- renderings ---------------------------------------------------------------------------
    def plain(self) -> str:
        """The verdict as text lines (a console, nbval, the static fallback's text)."""
        if self.refusal is not None:
            out = [f"✗ {self.refusal_where()}: {self.refusal}"]
            shown = self.offending_line()
            if shown is not None:
                out.append(f"  {self.line:>4} | {shown}")
                if self.column:
                    out.append("       | " + " " * (self.column - 1) + "^")
            return "\n".join(out)
        lines = [f"{'✓' if self.usable else '✗'} {self.blueprint.name if self.blueprint else '?'}: {self.counts}"]
        for item in self.findings:
            f = item.finding
            where = f"line {item.line}" if item.line else "blueprint"
            stage = f" stage '{f.stage}':" if f.stage else ""
            lines.append(f"  {f.severity:<7} {where:>9}:{stage} {f.message} [{f.code}]")
            if f.fix:
                lines.append(f"{'':19}{f.fix}")
        return "\n".join(lines)

    def refusal_where(self) -> str:
        if self.line is None:
            return "not loaded"
        return f"line {self.line}" + (f", column {self.column}" if self.column else "")

    def findings_html(self) -> str:
        """The verdict line, then the problem with its line (a refused text) or one row per finding."""
        return f"<div style='line-height:1.35;font-size:13px'>{self._findings_body()}</div>"

    def _findings_body(self) -> str:
        e = html.escape
        if self.refusal is not None:
            body = (f"<div style='color:{COLOURS['error']};font-weight:600'>✗ {e(self.refusal_where())}: "
                    f"{e(self.refusal)}</div>")
            shown = self.offending_line()
            if shown is not None:
                caret = ("\n" + " " * (len(str(self.line)) + 3 + self.column - 1) + "^") if self.column else ""
                body += (f"<pre style='{_MONO};margin:4px 0;padding:4px 6px;background:rgba(198,40,40,0.08);"
                         f"border-left:3px solid {COLOURS['error']};white-space:pre;overflow-x:auto'>"
                         f"{self.line} | {e(shown)}{e(caret)}</pre>")
            return body
        colour = "#2e7d32" if self.usable else COLOURS["error"]
        verdict = "✓ usable" if self.usable else "✗ not usable"
        head = (f"<div><span style='color:{colour};font-weight:600'>{verdict}</span> "
                f"— {e(self.blueprint.name if self.blueprint else '')}: {e(self.counts)}</div>")
        if not self.findings:
            return head
        rows = "".join(
            f"<tr><td style='{_CELL};color:{COLOURS[i.finding.severity]};font-weight:600'>{i.finding.severity}</td>"
            f"<td style='{_CELL};{_MONO};white-space:nowrap'>{'line ' + str(i.line) if i.line else '—'}</td>"
            f"<td style='{_CELL}'>{e(_said(i.finding))} <code style='{_MONO};opacity:0.75'>[{e(i.finding.code)}]</code>"
            + (f"<br><span style='opacity:0.75'>{e(i.finding.fix)}</span>" if i.finding.fix else "")
            + "</td></tr>"
            for i in self.findings
        )
        return head + f"<table style='border-collapse:collapse;margin-top:4px'>{rows}</table>"


def check_text(text: str, folder: str | os.PathLike[str] | None = None) -> Verdict:
    """Load and validate blueprint ``text`` as ``lev validate`` would a file in ``folder`` (default:
    the current directory), and locate every finding in the text."""
    import lev_nb
    from lev_nb.blueprint import load_text

    base = Path(folder) if folder is not None else Path.cwd()
    try:
        bp = load_text(text, base_dir=base)
    except BlueprintError as exc:
        return _refused(text, exc)
    report = lev_nb.validate(bp)
    if report.error is not None:
        if isinstance(report.exception, BlueprintError):
            return _refused(text, report.exception, report)
        return Verdict(text, report, refusal=report.error)
    located = [Located(f, finding_line(f, text, bp.raw)) for f in report.findings]
    return Verdict(text, report, blueprint=bp, findings=located)


def _refused(text: str, exc: BlueprintError, report: Report | None = None) -> Verdict:
    from lev_nb.blueprint.pipeline import refusal

    message = exc.detail
    if message.startswith(_TOML_PREFIX):  # the TOML reader's own words, without the file name and position
        message = "not valid TOML: " + re.sub(r"\s*\(at line \d+, column \d+\)", "", message[len(_TOML_PREFIX):])
    elif exc.key_path:
        message = f"{exc.key_path}: {message}"
    return Verdict(text, report or refusal(exc, False), refusal=message, line=exc.line, column=exc.column)


def _said(finding: Finding) -> str:
    return (f"stage '{finding.stage}': " if finding.stage else "") + finding.message


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def source_html(text: str, marks: dict[int, str] | None = None) -> str:
    """``text`` as a numbered listing with inline styles; ``marks`` colours a line's number by
    severity (line -> "error" | "warning" | "note")."""
    marks = marks or {}
    rows = []
    for number, line in enumerate(text.splitlines() or [""], start=1):
        colour = COLOURS.get(marks.get(number, ""), "")
        style = f"color:{colour};font-weight:700" if colour else "opacity:0.55"
        rows.append(f"<span style='{style};user-select:none'>{number:>3}</span>  {html.escape(line)}")
    return (f"<pre style='{_MONO};font-size:12px;line-height:1.4;margin:0;padding:6px 8px;white-space:pre;"
            f"overflow-x:auto;border:1px solid rgba(128,128,128,0.35);border-radius:4px'>" + "\n".join(rows) + "</pre>")


def line_marks(verdict: Verdict) -> dict[int, str]:
    """The worst severity on each line the verdict points at."""
    order = {"error": 0, "warning": 1, "note": 2}
    marks: dict[int, str] = {}
    if verdict.refusal is not None and verdict.line is not None:
        return {verdict.line: "error"}
    for item in verdict.findings:
        if item.line is None:
            continue
        current = marks.get(item.line)
        if current is None or order[item.finding.severity] < order[current]:
            marks[item.line] = item.finding.severity
    return marks


def diagram_of(bp: Blueprint) -> Any:
    """``bp``'s stage graph for display: Mermaid for JupyterLab, Graphviz's SVG for the rest."""
    from lev_nb.blueprint.graph import Diagram
    from lev_nb.blueprint.picture import svg_or_none

    return Diagram(bp.mermaid(), picture=lambda: svg_or_none(bp))
