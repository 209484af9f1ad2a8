"""Checking a tool call's arguments against the JSON Schema the model was shown."""

from __future__ import annotations

import logging
from typing import Any

from lev_nb.schemas import certainly_valid, compile_schema
from lev_nb.text import cut_text

__all__ = ["validate_arguments", "MAX_VIOLATIONS", "MAX_VIOLATION_BYTES"]

log = logging.getLogger(__name__)

MAX_VIOLATIONS = 3
MAX_VIOLATION_BYTES = 256


def _where(error: Any) -> str:
    """A JSON-pointer-ish location for an error (empty at the top level)."""
    if not error.absolute_path:
        return ""
    return "/" + "/".join(str(p) for p in error.absolute_path)


def validate_arguments(tool: str, schema: dict[str, Any] | None, arguments: Any) -> str | None:
    """None when ``arguments`` fit ``schema``; otherwise the ``[error] invalid arguments ...`` result.

    ``None`` arguments count as ``{}``. A schema that does not compile skips validation.
    """
    if not schema:
        return None
    args = {} if arguments is None else arguments
    if certainly_valid(schema, args):  # the common case, without jsonschema
        return None
    validator, problem = compile_schema(schema)
    if validator is None:
        log.warning("tool schema does not compile, skipping argument validation: %s", problem)
        return None
    errors = sorted(validator.iter_errors(args), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    if not errors:
        return None
    shown = []
    for error in errors[:MAX_VIOLATIONS]:
        where = _where(error)
        text = f"{where}: {error.message}" if where else error.message
        shown.append(cut_text(text, MAX_VIOLATION_BYTES))
    message = "; ".join(shown)
    if len(errors) > MAX_VIOLATIONS:
        message += f"; (and {len(errors) - MAX_VIOLATIONS} more)"
    return f"[error] invalid arguments for '{tool}': {message}"
