"""The result of ``lev validate``: findings, counts, the verdict, and its text / JSON renderings."""

from __future__ import annotations

import json
from dataclasses import field
from typing import TYPE_CHECKING, Any, Literal

from lev_nb.records import record

if TYPE_CHECKING:
    from .model import Blueprint

Severity = Literal["error", "warning", "note"]
SEVERITY_ORDER: dict[str, int] = {"error": 0, "warning": 1, "note": 2}
_LABEL = {"error": "ERR ", "warning": "WARN", "note": "NOTE"}


@record
class Finding:
    """One lint result: a stable ``code``, its ``severity``, the ``stage`` (or None), and text."""

    code: str
    severity: Severity
    message: str
    stage: str | None = None
    fix: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The finding as the ``--json`` object spells it."""
        return {"severity": self.severity, "code": self.code, "stage": self.stage,
                "message": self.message, "fix": self.fix}

    def render(self) -> str:
        """Two text lines: ``  WARN stage 'S': message [code]`` and the fix indented below."""
        where = f"stage '{self.stage}': " if self.stage is not None else ""
        line = f"  {_LABEL[self.severity]} {where}{self.message} [{self.code}]"
        if self.fix:
            line += f"\n       {self.fix}"
        return line


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Errors, then warnings, then notes; check order kept within a severity."""
    return sorted(findings, key=lambda f: SEVERITY_ORDER[f.severity])


@record(frozen=False)
class Report:
    """What validating one blueprint found.

    ``error`` is set ("parse error: ..." / "validation failed: ...") when the blueprint was
    refused before linting; ``findings`` is then empty and ``errors`` is 1. ``models`` is the
    model each stage would start on under the user's configuration, when it was asked for and
    could be read (:func:`lev_nb.verdict.stage_models` gives its shape; the ``models`` key of the
    ``--json`` object, null otherwise).
    """

    findings: list[Finding] = field(default_factory=list)
    blueprint: Blueprint | None = None
    error: str | None = None
    deny_warnings: bool = False
    exception: BaseException | None = field(default=None, repr=False, compare=False)
    models: dict[str, Any] | None = None

    @property
    def errors(self) -> int:
        """Number of error findings (1 for a refused blueprint)."""
        return 1 if self.error is not None else sum(f.severity == "error" for f in self.findings)

    @property
    def warnings(self) -> int:
        """Number of warnings."""
        return sum(f.severity == "warning" for f in self.findings)

    @property
    def notes(self) -> int:
        """Number of notes (never affect the verdict)."""
        return sum(f.severity == "note" for f in self.findings)

    @property
    def valid(self) -> bool:
        """No errors, and no warnings when ``deny_warnings`` is set."""
        return self.errors == 0 and not (self.deny_warnings and self.warnings > 0)

    def by_code(self, code: str) -> list[Finding]:
        """The findings with one code."""
        return [f for f in self.findings if f.code == code]

    @property
    def codes(self) -> list[str]:
        """The codes of all findings, in report order."""
        return [f.code for f in self.findings]

    def to_dict(self) -> dict[str, Any]:
        """The ``lev validate --json`` object."""
        bp = self.blueprint if self.error is None else None
        blueprint = None
        if bp is not None:
            blueprint = {
                "name": bp.agent.name,
                "version": bp.agent.version,
                "description": bp.agent.description,
                "entry_stage": bp.agent.entry_stage,
                "stages": bp.stage_names,
                "accepts_task": bp.accepts_task,
                "inputs": [{"key": i.key, "region": i.region, "required": i.required} for i in bp.inputs],
            }
        return {
            "valid": self.valid,
            "blueprint": blueprint,
            "error": self.error,
            "findings": [f.to_dict() for f in self.findings] if self.error is None else [],
            "errors": self.errors,
            "warnings": self.warnings if self.error is None else 0,
            "notes": self.notes if self.error is None else 0,
            "models": self.models if self.error is None else None,
        }

    def to_json(self) -> str:
        """Pretty-printed ``--json`` text."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    def failure_line(self) -> str | None:
        """The stderr line that explains a failing verdict, or None when it passes."""
        if self.error is not None:
            kind, _, msg = self.error.partition(": ")
            label = "Parse error" if kind == "parse error" else "Validation failed"
            if self.exception is not None:
                msg = str(self.exception)
            return f"Error: ✗ {label}: {msg}"
        if self.valid:
            return None
        parts = []
        if self.errors:
            parts.append(f"{self.errors} error{'s' if self.errors != 1 else ''}")
        if self.deny_warnings and self.warnings:
            parts.append(f"{self.warnings} warning{'s' if self.warnings != 1 else ''} (--deny-warnings)")
        return "Error: ✗ Blueprint has " + " and ".join(parts)

    def findings_text(self) -> str:
        """All findings as text lines."""
        return "\n".join(f.render() for f in self.findings)

    def __str__(self) -> str:
        if self.error is not None:
            return self.failure_line() or self.error
        name = self.blueprint.agent.name if self.blueprint is not None else "?"
        head = f"Blueprint '{name}': {'valid' if self.valid else 'NOT valid'} " \
               f"({self.errors} error(s), {self.warnings} warning(s), {self.notes} note(s))"
        body = self.findings_text()
        return head + ("\n" + body if body else "")

    def __repr__(self) -> str:
        name = self.blueprint.agent.name if self.blueprint is not None else None
        return (f"<Report {name!r} valid={self.valid} errors={self.errors} "
                f"warnings={self.warnings} notes={self.notes}>")

    def _repr_html_(self) -> str:
        colour = {"error": "#c62828", "warning": "#ef6c00", "note": "#1565c0"}
        if self.error is not None:
            return f"<div style='color:#c62828'><b>✗</b> {_escape(self.error)}</div>"
        # JupyterLab right-aligns table cells in outputs; findings read left to right.
        left = "text-align:left;vertical-align:top"
        rows = "".join(
            f"<tr><td style='color:{colour[f.severity]};{left}'>{f.severity}</td>"
            f"<td style='{left}'><code>{_escape(f.code)}</code></td><td style='{left}'>{_escape(f.stage or '')}</td>"
            f"<td style='{left}'>{_escape(f.message)}<br><small>{_escape(f.fix or '')}</small></td></tr>"
            for f in self.findings
        )
        verdict = "✓ valid" if self.valid else "✗ not valid"
        return (f"<div><b>{verdict}</b> — {self.errors} error(s), {self.warnings} warning(s), "
                f"{self.notes} note(s)<table>{rows}</table></div>")


def _escape(text: str) -> str:
    """HTML-escape ``text`` (html is imported when a report is drawn, not with every run)."""
    import html

    return html.escape(text)
