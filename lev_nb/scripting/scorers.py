"""Evaluation scorers (issue 22): a Rhai script defining ``fn score(answer, row)`` that judges one
answer of an evaluation, and ``lev test``'s ``tests/*.rhai`` scripts, which fail when they return
``false``. (The issue wrote the parameters ``(answer, case)``; ``case`` is a reserved word in Rhai,
so our documents name the second one ``row``: any name works.) Both run on the shared hardened engine of their budget, as validators do.

``score`` returns ``true``/``false``, a number (a score; it passes at or above the check's
threshold), a string (blank passes; other text fails, and is the reason) or ``()`` (passes).
"""

from __future__ import annotations

from dataclasses import field
from pathlib import Path
from typing import Any

from lev_nb.records import record
from lev_nb.rhai import AST, NotPlainDataError, RhaiError

from ._common import COMPILE_PREFIX, EXECUTE_PREFIX, ScriptError, compile_script, load_script, rhai_type_name, shared_engine
from .budgets import SCORER_MAX_OPERATIONS

__all__ = ["Score", "Scorer", "check_test_script", "compile_scorer", "run_test_script"]


@record
class Score:
    """What a scorer said: ``passed``, the number when it gave one, and the reason when it failed."""

    passed: bool
    value: float | None = None
    reason: str = ""


@record
class Scorer:
    """A compiled scorer defining ``fn score(answer, row)``."""

    label: str
    path: Path | None
    ast: AST = field(repr=False, compare=False)
    threshold: float = 0.5

    def score(self, answer: str, case: dict[str, Any]) -> Score:
        """Call ``score(answer, row)``; a script that fails or returns something else is a failed
        score whose reason says what went wrong (the evaluation goes on)."""
        try:
            result = shared_engine(SCORER_MAX_OPERATIONS).call(self.ast, "score", answer, case)
        except RhaiError as exc:
            return Score(False, reason=f"{self.label}: score failed: {exc}")
        except NotPlainDataError as exc:
            return Score(False, reason=f"{self.label}: score returned a value that is not plain data: {exc}")
        if result is None:
            return Score(True)
        if isinstance(result, bool):
            return Score(result, reason="" if result else f"{self.label}: score returned false")
        if isinstance(result, (int, float)):
            value = float(result)
            ok = value >= self.threshold
            return Score(ok, value, "" if ok else f"{self.label}: score {value:g} is below {self.threshold:g}")
        if isinstance(result, str):
            return Score(not result.strip(), reason=result.strip())
        return Score(False, reason=f"{self.label}: score must return a bool, a number or a string, "
                                   f"got {rhai_type_name(result)}")


def compile_scorer(path: str | Path | None = None, *, source: str | None = None, label: str | None = None,
                   threshold: float = 0.5) -> Scorer:
    """Compile a scorer; it must define ``fn score(answer, row)``. Raises ScriptError naming the
    file (and line) otherwise."""
    text, label, file = load_script(path, source, label)
    ast = compile_script(shared_engine(SCORER_MAX_OPERATIONS), text, label)
    arities = [arity for name, arity in ast.functions if name == "score"]
    if not arities:
        raise ScriptError(f"{COMPILE_PREFIX}{label}: a scorer must define fn score(answer, row)", label)
    if 2 not in arities:
        raise ScriptError(f"{COMPILE_PREFIX}{label}: fn score must take two parameters (answer, row), "
                          f"found {arities[0]}", label)
    return Scorer(label, file, ast, threshold)


def run_test_script(path: str | Path) -> str | None:
    """Run a ``lev test`` script: None when it passes, else why it failed (it returned ``false``,
    or it did not compile or run)."""
    engine = shared_engine(SCORER_MAX_OPERATIONS)
    try:
        text, label, _ = load_script(path, None, None)
        result = engine.run(compile_script(engine, text, label))
    except ScriptError as exc:
        return exc.message
    except RhaiError as exc:
        return f"{EXECUTE_PREFIX}{label}: {exc}"
    except NotPlainDataError:
        return None  # a value that is not plain data is not `false`
    return "the script returned false" if result is False else None


def check_test_script(path: str | Path) -> str | None:
    """Compile a ``lev test`` script without running it: None, or why it cannot run."""
    text, label, _ = load_script(path, None, None)
    try:
        compile_script(shared_engine(SCORER_MAX_OPERATIONS), text, label)
    except ScriptError as exc:
        return exc.message
    return None
