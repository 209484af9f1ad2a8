"""Shared fixtures for the engine tests: a private LEV_HOME, a working directory, and helpers to
build a blueprint from TOML text, run it with a scripted model and read what happened; and
``lev``, the command line run in this process."""

from __future__ import annotations

import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

Lev = Callable[..., subprocess.CompletedProcess[str]]  # the ``lev`` fixture
RUN_TIMEOUT_S = 60  # generous: a hung run fails the test instead of blocking the suite
AGENT_HEADER = '[agent]\nname = "engine-test"\n'


@pytest.fixture(autouse=True)
def _no_real_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never reach a real model: a key in the developer's shell must not leak into a run."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh lev_nb home for the test (LEV_HOME points at it)."""
    path = tmp_path / "home"
    monkeypatch.setenv("LEV_HOME", str(path))
    return path


@pytest.fixture
def lev(home: Path, capsys: pytest.CaptureFixture[str]) -> Lev:
    """``lev(*args)`` runs the ``lev`` command in this process, with LEV_HOME at ``home``, and returns
    what a subprocess would: the exit status, stdout and stderr (as text)."""
    from lev_nb.cli import main

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        capsys.readouterr()  # only this command's output
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse: usage errors, --help, --version
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["lev", *args], code, out, err)

    return run


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """An existing, empty working directory for the run."""
    path = tmp_path / "work"
    path.mkdir()
    return path


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


@pytest.fixture
def engine(home: Path, workdir: Path) -> RunHarness:
    """Run blueprints from TOML text: ``run, model = engine.run(toml, [turns...])``."""
    return RunHarness(home=home, workdir=workdir)


@pytest.fixture
def write_allowed() -> Callable[[str], str]:
    """Prefix a blueprint body with an agent header that lets write_file/edit_file run unattended."""

    def wrap(body: str) -> str:
        header = AGENT_HEADER + '[tool_permissions]\nwrite_file = "allow"\nedit_file = "allow"\n'
        return header + textwrap.dedent(body).strip() + "\n"

    return wrap
