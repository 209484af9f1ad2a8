"""Taint-gate policy rules (upstream rhai-tools.md "Policy rules"): a ``.rhai`` file that sees a
``context`` map (``tool``, ``target``, ``taint_level``) and evaluates to a boolean; ``true`` allows
a call the taint gate would otherwise stop.

A rule runs on the shared hardened engine with the validators' budget, and has no host functions.
A rule that does not compile, fails, or ends in anything but a boolean raises :class:`ScriptError`
naming its file; the gate treats that as "no match" (a broken rule never opens the gate).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lev_nb.records import record
from lev_nb.rhai import AST, NotPlainDataError, RhaiError

from ._common import EXECUTE_PREFIX, VALIDATE_PREFIX, ScriptError, compile_script, load_script, rhai_type_name, shared_engine

__all__ = ["RULE_OPERATIONS", "RuleScript", "compile_rule"]

RULE_OPERATIONS = 100_000


@record
class RuleScript:
    """A compiled policy rule; ``name`` is its file's stem (the name decisions cite)."""

    name: str
    label: str
    ast: AST

    def allows(self, context: Mapping[str, Any]) -> bool:
        """Evaluate the rule with ``context`` bound; raises ScriptError when it fails or does not
        end in a boolean."""
        try:
            value = shared_engine(RULE_OPERATIONS).run(self.ast, context=dict(context))
        except RhaiError as exc:
            raise ScriptError(f"{EXECUTE_PREFIX}{self.label}: {exc}", self.label, exc.line) from exc
        except NotPlainDataError as exc:
            raise ScriptError(f"{VALIDATE_PREFIX}{self.label}: the rule's value is not plain data: {exc}",
                              self.label) from exc
        if not isinstance(value, bool):
            raise ScriptError(f"{VALIDATE_PREFIX}{self.label}: a rule must evaluate to true or false, "
                              f"not {rhai_type_name(value)}", self.label)
        return value


def compile_rule(path: str | Path | None = None, *, source: str | None = None, label: str | None = None) -> RuleScript:
    """Compile a rule from its file (or from ``source``); raises ScriptError naming the file."""
    text, shown, file = load_script(path, source, label)
    ast = compile_script(shared_engine(RULE_OPERATIONS), text, shown)
    name = file.stem if file is not None else shown
    return RuleScript(name, shown, ast)
