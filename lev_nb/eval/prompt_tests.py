"""``lev test``: a blueprint's prompt tests, as the upstream runs them (cli.md "lev test").

A ``tests/*.toml`` file holds ``[[test]]`` cases (``name``, ``input``, ``expect_contains``,
``expect_tool_call``, ``max_tokens``). A case is one inference, not a run: the run is started as
``lev run`` would start it (a fresh context window, ``input`` seeded as the task, region hooks
active), its first request (iteration 0 of the entry stage, with that stage's model and tools) goes
to the model once, and the run is cancelled before anything the model asked for executes: a
``write_file`` call is asserted on, never performed. The throwaway run lives in a temporary home,
so the user's run store is left alone. A ``tests/*.rhai`` file is run as a script and fails when
it returns ``false``.

``--dry-run`` reads and checks the cases (keys, types, that an expected tool is one the entry stage
offers) and calls no provider.
"""

from __future__ import annotations

import asyncio
import dataclasses
import tempfile
import threading
import tomllib
from pathlib import Path
from typing import Any

from lev_nb.blueprint.errors import did_you_mean
from lev_nb.errors import CleanError
from lev_nb.records import record

__all__ = ["PromptCase", "Outcome", "TestFileError", "load_tests", "run_case", "run_script"]

KEYS = {"name": str, "input": str, "expect_contains": str, "expect_tool_call": str, "max_tokens": int}
WAIT_S = 600  # at most this long for the one inference (a provider has its own, shorter timeouts)


class TestFileError(CleanError, ValueError):
    """A tests/*.toml file that cannot be used; the message names the file and the key path."""

    __test__ = False  # not a pytest test class


@record
class PromptCase:
    """One ``[[test]]`` case of a tests/*.toml file."""

    __test__ = False

    name: str
    file: str
    input: str
    expect_contains: str | None = None
    expect_tool_call: str | None = None
    max_tokens: int | None = None


@record
class Outcome:
    """How a case or script went: ``passed``, why not (``reason``), and what the model said."""

    name: str
    passed: bool
    reason: str = ""
    text: str = ""
    tool_calls: tuple[str, ...] = ()
    tokens: int = 0


def load_tests(folder: Path, name_filter: str | None = None) -> tuple[list[PromptCase], list[Path]]:
    """The cases of ``folder``'s ``*.toml`` files (whose name contains ``name_filter``) and its
    ``*.rhai`` scripts (likewise by file name). Raises TestFileError for a file that cannot be used."""
    cases: list[PromptCase] = []
    for path in sorted(folder.glob("*.toml")):
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise TestFileError(f"{path}: cannot read the test file: {exc}") from None
        extra = [k for k in data if k != "test"]
        if extra:
            raise TestFileError(f"{path}: unknown table '{extra[0]}' (cases are [[test]] tables)")
        tests = data.get("test", [])
        if not isinstance(tests, list):
            raise TestFileError(f"{path}: 'test' must be an array of tables ([[test]])")
        for i, raw in enumerate(tests):
            cases.append(_case(raw, path, i))
    scripts = sorted(folder.glob("*.rhai"))
    if name_filter:
        cases = [c for c in cases if name_filter in c.name]
        scripts = [s for s in scripts if name_filter in s.name]
    return cases, scripts


def _case(raw: dict[str, Any], path: Path, i: int) -> PromptCase:
    where = f"{path}: test[{i}]"
    for key, value in raw.items():
        if key not in KEYS:
            hint = did_you_mean(key, KEYS)
            raise TestFileError(f"{where}.{key}: unknown key{f' ({hint})' if hint else ''}; "
                                f"a case takes {', '.join(KEYS)}")
        wanted = KEYS[key]
        if not isinstance(value, wanted) or isinstance(value, bool):
            raise TestFileError(f"{where}.{key}: must be {'a string' if wanted is str else 'a whole number'}, "
                                f"got {type(value).__name__}")
    if "input" not in raw:
        raise TestFileError(f"{where}: a case needs 'input' (the task it is seeded with)")
    if raw.get("max_tokens") is not None and raw["max_tokens"] < 1:
        raise TestFileError(f"{where}.max_tokens: must be 1 or more, got {raw['max_tokens']}")
    return PromptCase(raw.get("name") or f"{path.stem}[{i}]", str(path), raw["input"], raw.get("expect_contains"),
                      raw.get("expect_tool_call"), raw.get("max_tokens"))


def case_problems(case: PromptCase, blueprint: Any) -> list[str]:
    """What is wrong with ``case`` for ``blueprint`` without calling a model: an expected tool the
    entry stage does not list in ``available_tools``."""
    from lev_nb.engine.prepare import cached_plan

    plan = cached_plan(blueprint)
    stage = plan.stage(plan.entry)
    if case.expect_tool_call and case.expect_tool_call not in stage.tools:
        hint = did_you_mean(case.expect_tool_call, stage.tools)
        return [f"expect_tool_call '{case.expect_tool_call}' is not in the available_tools of stage '{stage.name}'"
                + (f" ({hint})" if hint else "")]
    return []


class _OneInference:
    """The model of a test run: passes the first stage request (capped at the case's
    ``max_tokens``) to the real provider once, keeps the answer, and never answers the engine,
    so nothing the model asked for runs before the run is cancelled."""

    def __init__(self, name: str, inner: Any, max_tokens: int | None) -> None:
        self.name = name
        self._inner = inner
        self._max_tokens = max_tokens
        self.request: Any = None
        self.response: Any = None
        self.error: BaseException | None = None
        self.answered = threading.Event()

    async def complete(self, request: Any) -> Any:
        from lev_nb.providers.base import call_complete
        from lev_nb.providers.resolve import provider_for

        if not self.answered.is_set():
            if self._max_tokens:
                request = dataclasses.replace(request, max_tokens=min(request.max_tokens, self._max_tokens))
            self.request = request
            provider = self._inner if self._inner is not None else provider_for(request.provider, request.model)
            try:
                self.response = await call_complete(provider, request)
            except Exception as exc:  # reported as the case's failure
                self.error = exc
            self.answered.set()
        await asyncio.Event().wait()  # held until the run is cancelled


def run_case(case: PromptCase, blueprint: Any, model: Any = None) -> Outcome:
    """One inference for ``case`` (see the module docstring); ``model`` replaces the entry stage's
    model (a spec or a Provider), as ``lev run --model`` does."""
    from lev_nb.engine.api import start_run
    from lev_nb.engine.pipeline.inference import pick_model
    from lev_nb.engine.prepare import cached_plan
    from lev_nb.providers.resolve import resolve_model
    from lev_nb.settings import current as current_settings

    problems = case_problems(case, blueprint)
    if problems:
        return Outcome(case.name, False, problems[0])
    inner = resolve_model(model)
    plan = cached_plan(blueprint)
    pick = pick_model(plan.stage(plan.entry), current_settings())
    if pick.refusal is not None and inner is None:
        return Outcome(case.name, False, pick.refusal)
    name = str(getattr(inner, "name", "")) if inner is not None else pick.provider
    probe = _OneInference(name.partition("/")[0] or pick.provider, inner, case.max_tokens)
    with tempfile.TemporaryDirectory(prefix="lev-test-") as scratch:
        run = start_run(blueprint, task=case.input, model=probe, home=Path(scratch) / "home",
                        workdir=Path(scratch) / "work", interactive=False)
        try:
            while not probe.answered.wait(0.05):
                if run.done() or not _alive(run):
                    break
        finally:
            run.cancel()
            run.wait(WAIT_S)
    if probe.error is not None:
        return Outcome(case.name, False, f"the model call failed: {probe.error}")
    if probe.response is None:
        return Outcome(case.name, False, f"the run ended before its first model call: {run.error or run.status}")
    return judge_response(case, probe.response)


def _alive(run: Any) -> bool:
    return run.status not in ("complete", "error", "cancelled")


def judge_response(case: PromptCase, response: Any) -> Outcome:
    """The case's assertions on the model's one answer."""
    text = response.text or ""
    calls = tuple(c.name for c in response.tool_calls)
    tokens = response.usage.prompt_tokens + response.usage.completion_tokens
    reasons = []
    if case.expect_contains is not None and case.expect_contains.lower() not in text.lower():
        reasons.append(f"the response does not contain {case.expect_contains!r}")
    if case.expect_tool_call is not None and case.expect_tool_call not in calls:
        called = ", ".join(calls) or "no tool"
        reasons.append(f"expected a call to {case.expect_tool_call}, the model called {called}")
    return Outcome(case.name, not reasons, "; ".join(reasons), text, calls, tokens)


def run_script(path: Path) -> Outcome:
    """A tests/*.rhai script: it fails when it returns ``false`` (or does not compile or run)."""
    from lev_nb.scripting.scorers import run_test_script

    reason = run_test_script(path)
    return Outcome(path.name, reason is None, reason or "")
