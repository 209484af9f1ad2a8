"""Output validators (docs/rhai.md#output-validators): :func:`compile_validator` -> :class:`Validator`, whose
``check`` gives :class:`Valid`, :class:`Invalid` or :class:`Unusable`.

A validator that fails while running does not fail the submission: it gives ``Unusable`` and the
content is accepted unchecked (the runtime logs a warning).
"""

from __future__ import annotations

from dataclasses import field
from pathlib import Path

from lev_nb.records import record
from lev_nb.rhai import AST, NotPlainDataError, RhaiError

from ._common import (
    compile_script,
    load_script,
    require_unary,
    rhai_type_name,
    shared_engine,
)
from .budgets import VALIDATOR_MAX_OPERATIONS


@record
class Valid:
    """The content passes the validator."""


@record
class Invalid:
    """The validator rejected the content; ``reason`` goes back to the model."""

    reason: str


@record
class Unusable:
    """The validator itself failed; the submission is accepted unchecked (and a warning logged)."""

    message: str


Verdict = Valid | Invalid | Unusable


@record
class Validator:
    """A compiled output validator defining ``fn validate(content)``."""

    label: str
    path: Path | None
    ast: AST = field(repr=False, compare=False)

    def check(self, content: str) -> Verdict:
        """Run ``validate(content)``: () or blank text is Valid, other text Invalid, else Unusable."""
        try:
            result = shared_engine(VALIDATOR_MAX_OPERATIONS).call(self.ast, "validate", content)
        except RhaiError as exc:
            return Unusable(f"{self.label}: validate: {exc}")
        except NotPlainDataError as exc:
            return Unusable(f"{self.label}: validate must return () or a string, got {exc}")
        if result is None or (isinstance(result, str) and not result.strip()):
            return Valid()
        if isinstance(result, str):
            return Invalid(result)
        return Unusable(f"{self.label}: validate must return () or a string, got {rhai_type_name(result)}")


def compile_validator(
    path: str | Path | None = None, *, source: str | None = None, label: str | None = None
) -> Validator:
    """Compile an output validator; it must define ``fn validate(content)``. Raises ScriptError."""
    text, label, file = load_script(path, source, label)
    ast = compile_script(shared_engine(VALIDATOR_MAX_OPERATIONS), text, label)
    require_unary(ast, text, label, "validate", "content", required=True)
    return Validator(label, file, ast)
