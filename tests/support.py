"""Plain helpers shared by the test modules (``from support import ...``; tests/ is on pythonpath):
where the repository's files are, building a blueprint from TOML text, scripted model turns, reading
what a run emitted, and the harness behind the ``engine`` fixture. Fixtures live in conftest.py."""

from __future__ import annotations

import json
import subprocess
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]  # the repository
BLUEPRINTS = ROOT / "blueprints"  # the bundled agents
FIXTURES = ROOT / "tests" / "fixtures"  # fixture blueprints: invalid/, lints/, upstream/
SNAPSHOTS = ROOT / "tests" / "snapshots"  # expected Mermaid flowcharts of the bundled agents

RUN_TIMEOUT_S = 60  # generous: a hung run fails the test instead of blocking the suite
Lev = Callable[..., subprocess.CompletedProcess[str]]  # the ``lev`` fixture: the command line in this process
AGENT_HEADER = '[agent]\nname = "engine-test"\n'

# Stage tables many engine tests run (``blueprint`` and the ``engine`` fixture add the [agent] header).
# One stage that may list the workdir; an answer without a tool call is nudged.
WORK_STAGE = '[stages.work]\navailable_tools = ["list_dir"]\n[stages.work.transitions]\n'
# The same with nudges off: its first answer without a tool call ends the stage.
QUIET_WORK_STAGE = ('[stages.work]\navailable_tools = ["list_dir"]\nnudge = { enabled = false }\n'
                    "[stages.work.transitions]\n")
# One output stage that answers through submit_output, nudges off.
OUTPUT_STAGE = ('[stages.answer]\nmode = "output"\navailable_tools = ["submit_output"]\nnudge = { enabled = false }\n'
                "[stages.answer.transitions]\n")
# One stage that runs shell commands (and writes files) without asking.
SHELL_STAGE = ('[stages.work]\navailable_tools = ["shell"]\n'
               'tool_permissions = { shell = "allow", write_file = "allow" }\n[stages.work.transitions]\n')

# A checkpoint on a plan held in a pinned region: approve, send back with a directive, or abandon.
PLAN_CHECKPOINT = """[context.regions]
plan_doc = { kind = "pinned", max_tokens = 1000 }

[stages.draft]
mode = "interactive_points"
max_iterations = 6

[[stages.draft.interaction_points]]
name = "approve_plan"
prompt = "Roll out this plan?"
style = "multiple_choice"
options = ["Approve"]
abort_options = ["Abandon"]
directives = { "Shorter" = "Cut the plan to three steps." }
document_region = "plan_doc"
unattended = "ask"

[stages.draft.transitions]
"""

def blueprint(text: str) -> Any:
    """Load a blueprint from TOML text; an ``[agent]`` header is added when the text has none."""
    from lev_nb.blueprint.loader import load_text

    body = textwrap.dedent(text).strip() + "\n"
    if "[agent]" not in body:
        body = AGENT_HEADER + body
    return load_text(body)


def say(text: str) -> dict[str, Any]:
    """A scripted turn that answers with text only."""
    return {"text": text}


def call(name: str, text: str = "", **arguments: Any) -> dict[str, Any]:
    """A scripted turn that makes one tool call."""
    return {"text": text, "tool_calls": [{"name": name, "arguments": arguments}]}


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """A scripted turn that makes several tool calls in one batch."""
    return {"tool_calls": [{"name": n, "arguments": a} for n, a in pairs]}


def fail(kind: str = "api", message: str = "boom") -> dict[str, Any]:
    """A scripted turn that is a provider error."""
    return {"error": {"kind": kind, "message": message}}


def kinds(run: Any) -> list[str]:
    """The kinds of every event the run emitted, in order."""
    return [e.kind for e in run.events.snapshot()]


def events_of(run: Any, kind: str) -> list[Any]:
    """The run's events of one kind."""
    return [e for e in run.events.snapshot() if e.kind == kind]


def purposes(model: Any) -> list[str]:
    """The purpose (stage / routing / summary) of every request the scripted model received."""
    return [r.purpose for r in model.requests]


def request_text(request: Any) -> str:
    """Everything a request shows the model: system blocks and message texts, joined."""
    from lev_nb.messages import request_text as flatten

    return flatten(request)


class FnModel:
    """A provider answering from ``fn(request)``: a scripted-style turn (``say``/``call``), a
    ModelResponse, or a coroutine of either (to wait on something the test controls). Every
    request is kept in ``requests``; each answer counts 10 prompt and 2 completion tokens."""

    name = "fn-model"

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn
        self.requests: list[Any] = []

    async def complete(self, request: Any) -> Any:
        import asyncio

        from lev_nb.messages import ModelResponse, ToolCall, Usage

        self.requests.append(request)
        n = len(self.requests)
        turn = self.fn(request)
        if asyncio.iscoroutine(turn):
            turn = await turn
        if isinstance(turn, ModelResponse):
            return turn
        calls = [ToolCall(f"c{n}-{i}", c["name"], c.get("arguments", {})) for i, c in enumerate(turn.get("tool_calls", []))]
        return ModelResponse(text=turn.get("text", ""), tool_calls=calls, usage=Usage(prompt_tokens=10, completion_tokens=2))


@dataclass
class RunHarness:
    """Starts runs of TOML blueprints in this test's home and workdir."""

    home: Path
    workdir: Path

    def start(self, toml: str | Any, turns: Any = None, *, task: str = "do the task", **kw: Any) -> tuple[Any, Any]:
        """Start a run; ``turns`` is a ScriptedModel script (or a Provider / "mock")."""
        from lev_nb.engine.api import start_run
        from lev_nb.engine.pipeline.inference import RetryPolicy
        from lev_nb.providers.scripted import ScriptedModel

        bp = blueprint(toml) if isinstance(toml, str) else toml
        model = ScriptedModel(turns) if isinstance(turns, (list, dict)) else turns
        kw.setdefault("workdir", self.workdir)
        kw.setdefault("home", self.home)
        kw.setdefault("retry", RetryPolicy(max_attempts=1))
        run = start_run(bp, task=task, model=model, **kw)
        return run, model

    def run(self, toml: str | Any, turns: Any = None, **kw: Any) -> tuple[Any, Any]:
        """Start a run and wait for it to end."""
        run, model = self.start(toml, turns, **kw)
        run.wait(RUN_TIMEOUT_S)
        assert run.done()
        return run, model


def next_request(run: Any, seen: set[str] | None = None, timeout: float = RUN_TIMEOUT_S) -> Any:
    """The run's next pending request (one whose id is not in ``seen``, which it is added to),
    waiting for it; fails the test if the run ends first or none comes within ``timeout``."""
    import time

    seen = seen if seen is not None else set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for request in run.pending:
            if request.id not in seen:
                seen.add(request.id)
                return request
        if run.done():
            raise AssertionError(f"the run ended ({run.status}: {run.error}) without asking anything more")
        time.sleep(0.01)
    raise AssertionError("no request came")


class CrashingModel:
    """A picklable provider for batch tests: the first call that claims ``marker`` (or, with
    ``always``, every call) ends its whole process at once, as a crashed worker would; other calls
    answer as the ``mock`` model does."""

    name = "crashing"

    def __init__(self, marker: str, always: bool = False) -> None:
        self.marker = marker
        self.always = always

    async def complete(self, request: Any) -> Any:
        import os

        from lev_nb.providers import MockModel

        if self.always:
            os._exit(3)
        try:
            os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return await MockModel().complete(request)
        os._exit(3)


def reply_json(handler: Any, body: Any, status: int = 200) -> None:
    """Answer the request ``handler`` (an ``http.server`` handler) with ``body`` as JSON."""
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
