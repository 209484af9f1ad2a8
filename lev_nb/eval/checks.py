"""The checks of an evaluation (issue 22): what judges one case's answer, giving a :class:`Verdict`.

- built in: :func:`equals`, :func:`contains`, :func:`regex`, :func:`json_schema`, :func:`json_field`
  (each compares with the case's ``expected`` unless given a value of its own);
- :func:`scorer`: a Rhai script ``fn score(answer, row)`` on the hardened engine and budget of
  :mod:`lev_nb.scripting.scorers`;
- a Python callable ``f(answer, case)`` (wrapped by :func:`as_check`);
- :class:`lev_nb.eval.judge.Judge`: a model with a rubric.

A check is a callable ``(Answer, Case) -> Verdict`` with a ``name`` and a ``spec()`` (what the
evaluation's record keeps to say how it was judged). :func:`parse_check` reads the command line's
``--check`` forms. A check that raises does not stop the evaluation: its verdict fails with the
exception as the reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lev_nb.errors import UsageError
from lev_nb.eval.datasets import Case
from lev_nb.eval.forms import CHECK_FORMS
from lev_nb.records import record

__all__ = ["Answer", "Check", "Verdict", "as_check", "contains", "equals", "json_field", "json_schema",
           "parse_check", "regex", "scorer", "CHECK_FORMS"]



@record
class Answer:
    """A run's answer as checks see it: its ``content`` (None when it gave none), its ``format``,
    how the run ended (``status``, ``error``) and its ``run_id``."""

    content: str | None
    format: str | None = None
    status: str = "complete"
    error: str | None = None
    run_id: str | None = None


@record
class Verdict:
    """One check's word on one case: ``passed``, the ``reason`` when it failed, a ``score`` when
    the check gave a number, and what it cost (a judge's model calls, counted apart from the run's)."""

    check: str
    passed: bool
    reason: str = ""
    score: float | None = None
    cost_usd: float = 0.0
    tokens: int = 0


class Check:
    """Base of the checks: ``name``, ``spec()`` for the record, and ``judge(answer, case)``."""

    name = "check"

    def spec(self) -> dict[str, Any]:
        """What the evaluation's record keeps of this check (enough to build it again)."""
        return {"kind": self.name}

    def judge(self, answer: Answer, case: Case) -> Verdict:
        raise NotImplementedError

    def __call__(self, answer: Answer, case: Case) -> Verdict:
        return self.judge(answer, case)


def _wanted(value: Any, case: Case, check: str) -> Any:
    """The value a check compares with: its own, else the case's expected (a missing one fails)."""
    if value is not None:
        return value
    if case.expected is None:
        raise _NoExpected(f"{check}: row {case.index + 1} has no 'expected' value to compare with")
    return case.expected


class _NoExpected(Exception):
    pass


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


class _Simple(Check):
    """A built-in check: ``test(content, wanted) -> reason or ''``."""

    def __init__(self, name: str, value: Any, test: Callable[[str, Any], str], label: str | None = None,
                 uses_expected: bool = True, **spec: Any) -> None:
        self.name = label or name
        self._kind, self._value, self._test, self._uses, self._spec = name, value, test, uses_expected, spec

    def spec(self) -> dict[str, Any]:
        return {"kind": self._kind, "value": self._value, **self._spec}

    def judge(self, answer: Answer, case: Case) -> Verdict:
        try:
            wanted = _wanted(self._value, case, self.name) if self._uses else self._value
        except _NoExpected as exc:
            return Verdict(self.name, False, str(exc))
        reason = self._test(answer.content or "", wanted)
        return Verdict(self.name, not reason, reason)


def _clip(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def equals(value: Any = None, *, ignore_case: bool = False) -> Check:
    """The answer, trimmed, equals ``value`` (default: the case's ``expected``)."""

    def test(content: str, wanted: Any) -> str:
        a, b = content.strip(), _text(wanted).strip()
        if ignore_case:
            a, b = a.lower(), b.lower()
        return "" if a == b else f"expected {_clip(_text(wanted))!r}, got {_clip(content)!r}"

    return _Simple("equals", value, test, ignore_case=ignore_case)


def contains(value: Any = None, *, case_sensitive: bool = False) -> Check:
    """The answer contains ``value`` (default: the case's ``expected``); case-insensitive unless
    ``case_sensitive`` (the upstream's ``expect_contains`` ignores case too). A list: every item."""

    def test(content: str, wanted: Any) -> str:
        items = wanted if isinstance(wanted, list) else [wanted]
        hay = content if case_sensitive else content.lower()
        missing = [_text(w) for w in items if (_text(w) if case_sensitive else _text(w).lower()) not in hay]
        return f"does not contain {', '.join(repr(_clip(m)) for m in missing)}" if missing else ""

    return _Simple("contains", value, test, case_sensitive=case_sensitive)


def regex(pattern: str) -> Check:
    """The answer matches ``pattern`` somewhere (``re.search``)."""
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise UsageError(f"regex check: the pattern {pattern!r} does not compile ({exc})") from None

    def test(content: str, _: Any) -> str:
        return "" if compiled.search(content) else f"does not match /{pattern}/"

    return _Simple("regex", pattern, test, uses_expected=False)


def _parse_json(content: str) -> tuple[Any, str]:
    try:
        return json.loads(content), ""
    except json.JSONDecodeError as exc:
        return None, f"the answer is not JSON ({exc.msg} at line {exc.lineno})"


def json_schema(schema: dict[str, Any] | str | Path) -> Check:
    """The answer is JSON valid against ``schema`` (a dict, or a JSON file's path)."""
    from lev_nb.schemas import compile_schema

    if isinstance(schema, dict):
        loaded = schema
    else:
        path = Path(schema)
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise UsageError(f"schema check: cannot read the schema {path}: {exc}") from None
    validator, why = compile_schema(loaded)
    if validator is None:
        raise UsageError(f"schema check: the schema is not a usable JSON Schema: {why}")

    def test(content: str, _: Any) -> str:
        value, error = _parse_json(content)
        if error:
            return error
        problem = next(iter(validator.iter_errors(value)), None)
        if problem is None:
            return ""
        where = "/".join(str(p) for p in problem.absolute_path) or "the answer"
        return f"{where}: {problem.message}"

    return _Simple("json_schema", loaded, test, uses_expected=False)


def _field(value: Any, path: str) -> tuple[Any, bool]:
    for part in path.split(".") if path else []:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
            value = value[int(part)]
        else:
            return None, False
    return value, True


def json_field(path: str, value: Any = None) -> Check:
    """The answer is JSON whose field at ``path`` (dots: ``items.0.name``) equals ``value``
    (default: the case's ``expected``; a JSON text in a CSV cell is read as JSON)."""

    def test(content: str, wanted: Any) -> str:
        parsed, error = _parse_json(content)
        if error:
            return error
        found, ok = _field(parsed, path)
        if not ok:
            return f"no field '{path}' in the answer"
        if isinstance(wanted, str) and not isinstance(found, str):
            try:
                wanted = json.loads(wanted)
            except json.JSONDecodeError:
                pass
        return "" if found == wanted else f"{path}: expected {_clip(_text(wanted))!r}, got {_clip(_text(found))!r}"

    return _Simple("json_field", value, test, label=f"json_field:{path}", path=path)


class _Scorer(Check):
    def __init__(self, compiled: Any, threshold: float) -> None:
        self._scorer, self._threshold = compiled, threshold
        self.name = f"rhai:{Path(compiled.label).name}"

    def spec(self) -> dict[str, Any]:
        return {"kind": "rhai", "label": self._scorer.label, "threshold": self._threshold,
                "path": str(self._scorer.path) if self._scorer.path else None}

    def judge(self, answer: Answer, case: Case) -> Verdict:
        row = {**case.row, "task": case.task, "expected": case.expected, "inputs": case.inputs,
               "format": answer.format or "", "status": answer.status}
        score = self._scorer.score(answer.content or "", _plain(row))
        return Verdict(self.name, score.passed, score.reason, score.value)


def _plain(value: Any) -> Any:
    """A row as Rhai plain data (None becomes ``()``; other values go through JSON)."""
    return json.loads(json.dumps(value, default=str))


def scorer(path: str | Path | None = None, *, source: str | None = None, label: str | None = None,
           threshold: float = 0.5) -> Check:
    """A Rhai scorer ``fn score(answer, row)`` from a file or from source text; ``row`` holds the
    dataset's columns plus ``task``, ``expected``, ``inputs``, ``format`` and ``status``. Raises
    ScriptError (file and line) when it does not compile."""
    from lev_nb.scripting.scorers import compile_scorer

    return _Scorer(compile_scorer(path, source=source, label=label, threshold=threshold), threshold)


class _Callable(Check):
    def __init__(self, fn: Callable[..., Any]) -> None:
        self._fn = fn
        self.name = getattr(fn, "__name__", type(fn).__name__)

    def spec(self) -> dict[str, Any]:
        return {"kind": "python", "name": self.name, "module": getattr(self._fn, "__module__", None)}

    def judge(self, answer: Answer, case: Case) -> Verdict:
        return verdict_of(self.name, self._fn(answer, case))


def verdict_of(name: str, result: Any) -> Verdict:
    """A Python check's return value as a verdict: a Verdict; a bool; None (pass); a number (a
    score, pass at 0.5 or more); a string (blank passes, else the reason); ``(bool, reason)``."""
    if isinstance(result, Verdict):
        return result
    if result is None:
        return Verdict(name, True)
    if isinstance(result, bool):
        return Verdict(name, result, "" if result else f"{name} returned False")
    if isinstance(result, (int, float)):
        ok = result >= 0.5
        return Verdict(name, ok, "" if ok else f"{name}: score {result:g} is below 0.5", float(result))
    if isinstance(result, str):
        return Verdict(name, not result.strip(), result.strip())
    if isinstance(result, tuple) and len(result) == 2:
        return Verdict(name, bool(result[0]), "" if result[0] else str(result[1]))
    return Verdict(name, False, f"{name} returned a {type(result).__name__}; return a bool, a number, a string "
                                f"or (passed, reason)")


def as_check(check: Any) -> Check:
    """A check given to ``evaluate``: a Check as it is, a ``--check`` string parsed, a callable wrapped."""
    if isinstance(check, Check):
        return check
    if isinstance(check, (str, Path)):
        return parse_check(str(check))
    if callable(check):
        return _Callable(check)
    raise UsageError(f"a check must be a check (lev_nb.eval.checks), a callable or a string, "
                     f"not {type(check).__name__}", f"strings: {', '.join(CHECK_FORMS)}")


def parse_check(spec: str, judge_model: Any = None) -> Check:
    """A check from its command-line form (see :data:`CHECK_FORMS`)."""
    kind, sep, arg = spec.partition(":")
    kind = kind.strip().lower()
    if spec.endswith(".rhai") and kind not in ("rhai",):
        return scorer(spec)
    if kind == "equals":
        return equals(arg if sep else None)
    if kind == "contains":
        return contains(arg if sep else None)
    if kind == "regex" and arg:
        return regex(arg)
    if kind in ("schema", "json_schema") and arg:
        return json_schema(arg)
    if kind in ("field", "json_field") and arg:
        path, has_value, value = arg.partition("=")
        return json_field(path, value if has_value else None)
    if kind in ("rhai", "scorer") and arg:
        return scorer(arg)
    if kind == "judge" and arg:
        from lev_nb.eval.judge import Judge

        return Judge(arg, model=judge_model)
    raise UsageError(f"'{spec}' is not a check", f"use one of: {', '.join(CHECK_FORMS)}")
