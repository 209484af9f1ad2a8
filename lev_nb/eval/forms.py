"""The command-line forms of a check (``lev eval --check``), apart from the checks themselves so
that ``lev --help`` can list them without importing the evaluation layer."""

from __future__ import annotations

__all__ = ["CHECK_FORMS"]

CHECK_FORMS = ("equals[:TEXT]", "contains[:TEXT]", "regex:PATTERN", "schema:FILE.json", "field:PATH[=VALUE]",
               "rhai:FILE.rhai (or FILE.rhai)", "judge:RUBRIC")
