"""A model as judge (issue 22): one request per case, through the same providers as runs, asking
whether the answer meets a rubric. Its tokens and cost are counted on the verdict, apart from the
run's own.

The judge is asked to reply with a JSON object ``{"pass": true|false, "reason": "..."}``; a reply
that starts with PASS or FAIL is read too. Anything else fails the case with the reply quoted, so
an unreadable judge is never taken for a pass. The request's stage is ``judge``, so a scripted
model can give a judge its own list (``{"judge": [...]}``).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Coroutine
from typing import Any, TypeVar

from lev_nb.eval.checks import Answer, Check, Verdict
from lev_nb.eval.datasets import Case
from lev_nb.providers.base import call_complete

__all__ = ["Judge", "run_coroutine"]

T = TypeVar("T")

DEFAULT_JUDGE_MODEL = "anthropic/claude-haiku-4-5"
JUDGE_STAGE = "judge"
SYSTEM = (
    "You grade one answer of an AI agent against a rubric. Read the task, the expected answer when "
    "there is one, and the agent's answer. Reply with one JSON object and nothing else: "
    '{"pass": true or false, "reason": "one short sentence"}.'
)
_VERDICT = re.compile(r"\{.*\}", re.DOTALL)


class Judge(Check):
    """A model judging each answer against ``rubric``. ``model`` is a model spec as for runs
    (``"provider/model"``, ``"scripted:FILE"``) or a Provider object; default Claude Haiku."""

    def __init__(self, rubric: str, model: Any = None, *, max_tokens: int = 300, name: str = "judge") -> None:
        from lev_nb.providers.resolve import resolve_model

        self.rubric = rubric
        self.name = name
        self.max_tokens = max_tokens
        self._spec = model if isinstance(model, str) or model is None else getattr(model, "name", "provider")
        self._provider = resolve_model(model if model is not None else DEFAULT_JUDGE_MODEL)

    def spec(self) -> dict[str, Any]:
        return {"kind": "judge", "rubric": self.rubric, "model": self._spec or DEFAULT_JUDGE_MODEL}

    def missing_key(self) -> str | None:
        """Why this judge cannot call its model at all (its provider's API key is not set), or None."""
        from lev_nb.providers.resolve import ModelOverride, missing_key

        if isinstance(self._provider, ModelOverride):
            variable = missing_key(self._provider.provider)
            if variable:
                return f"the judge's model {self._provider.name} needs an API key: {variable} is not set"
        return None

    def judge(self, answer: Answer, case: Case) -> Verdict:
        return run_coroutine(self.ajudge(answer, case))

    async def ajudge(self, answer: Answer, case: Case) -> Verdict:
        """Ask the judge model about one answer."""
        from lev_nb.messages import Message, ModelRequest
        from lev_nb.providers.base import ProviderError
        from lev_nb.providers.pricing import price_for

        provider, model = self._names()
        prompt = [f"Rubric:\n{self.rubric}", f"Task:\n{case.task}"]
        if case.inputs:
            prompt.append("Inputs:\n" + json.dumps(case.inputs, ensure_ascii=False, indent=1))
        if case.expected is not None:
            prompt.append(f"Expected answer:\n{case.expected}")
        prompt.append(f"The agent's answer:\n{answer.content or ''}")
        request = ModelRequest(provider=provider, model=model, system=[SYSTEM],
                               messages=[Message(role="user", content="\n\n".join(prompt))],
                               max_tokens=self.max_tokens, stage=JUDGE_STAGE)
        assert self._provider is not None
        try:
            response = await call_complete(self._provider, request)
        except ProviderError as exc:
            return Verdict(self.name, False, f"the judge model failed: {exc}")
        price = price_for(provider, model)
        cost = price.cost(response.usage) if price is not None else 0.0
        tokens = response.usage.prompt_tokens + response.usage.completion_tokens
        passed, reason = read_verdict(response.text)
        return Verdict(self.name, passed, "" if passed else reason, cost_usd=cost, tokens=tokens)

    def _names(self) -> tuple[str, str]:
        name = getattr(self._provider, "name", "") or ""
        provider, _, model = str(name).partition("/")
        return provider or "judge", model or JUDGE_STAGE


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to its end from plain code, on a thread of its own: a notebook's kernel
    already runs an event loop on this thread, where ``asyncio.run`` is refused."""
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="lev-judge") as pool:
        return pool.submit(asyncio.run, coroutine).result()


def read_verdict(text: str) -> tuple[bool, str]:
    """The judge's reply as (passed, reason); an unreadable reply fails, quoting it."""
    match = _VERDICT.search(text)
    if match:
        try:
            data = json.loads(match.group(0))
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("pass"), bool):
            return data["pass"], str(data.get("reason") or ("" if data["pass"] else "the judge said fail"))
    head = text.strip()
    word = head.split(None, 1)[0].strip(":.,").upper() if head else ""
    if word in ("PASS", "FAIL"):
        rest = head[len(word):].strip(" :.-\n") or f"the judge said {word.lower()}"
        return word == "PASS", rest
    return False, f"the judge's reply could not be read: {' '.join(text.split())[:120]!r}"
