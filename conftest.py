"""README.md is a test: every code block in it runs as written, collected by Sybil (a kept library
for testing documentation examples), so an example that stops working fails the suite.

- ``python`` blocks run in one namespace per document, in order; a block written as a doctest
  (``>>>``) also checks its output; ``<!-- invisible-code-block: python -->`` comments hold checks
  a reader does not need to see.
- ``bash`` blocks run with ``bash -eu -o pipefail`` and must exit 0; ``lev`` is the command of
  this environment.
- ``toml`` blocks are configuration examples: each is read as a ``config.toml`` and must load.
- ``<!-- skip: next "reason" -->`` marks the few blocks that cannot run here (they install
  software, or need an API key).

Everything runs in a fresh folder that holds links to ``blueprints/`` and ``examples/``, with a private LEV_HOME,
no user configuration and no API key, so the examples never write into the checkout or a user's
run store and never reach a real model.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from sybil import Example, Sybil
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser, SkipParser

ROOT = Path(__file__).resolve().parent
# Settings a developer may have exported that would change what the examples do.
_CLEARED = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL",
            "OPENROUTER_API_KEY", "OLLAMA_HOST", "LEV_CONFIG", "LEVIATH_CONFIG_PATH", "LEVIATH_HOME")


def _setup(namespace: dict[str, Any]) -> None:
    folder = Path(tempfile.mkdtemp(prefix="lev-readme-"))
    (folder / "blueprints").symlink_to(ROOT / "blueprints", target_is_directory=True)
    (folder / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    saved_env = {name: os.environ.get(name) for name in (*_CLEARED, "LEV_HOME", *_config_variables())}
    for name in saved_env:
        os.environ.pop(name, None)
    os.environ["LEV_HOME"] = str(folder / "home")
    namespace["_readme"] = {"folder": folder, "cwd": os.getcwd(), "env": saved_env}
    os.chdir(folder)


def _teardown(namespace: dict[str, Any]) -> None:
    import shutil

    state = namespace["_readme"]
    os.chdir(state["cwd"])
    for name, value in state["env"].items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    shutil.rmtree(state["folder"], ignore_errors=True)


def _config_variables() -> list[str]:
    from lev_nb.settings.schema import ENVIRONMENT

    return [name for name, _ in ENVIRONMENT]


def _run_bash(example: Example) -> None:
    folder = example.namespace["_readme"]["folder"]
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # this environment's lev
    out = subprocess.run(["bash", "-eu", "-o", "pipefail", "-c", example.parsed], cwd=folder, env=env,
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise AssertionError(f"README bash block at line {example.line} exited {out.returncode}:\n"
                             f"{example.parsed}\n--- stdout\n{out.stdout}\n--- stderr\n{out.stderr}")


def _check_config(example: Example) -> None:
    from lev_nb.settings import load

    path = example.namespace["_readme"]["folder"] / f"config-example-{example.line}.toml"
    path.write_text(example.parsed, encoding="utf-8")
    load(path, environ={})  # raises ConfigError, naming the line and key, for an example that is wrong


pytest_collect_file = Sybil(
    parsers=[
        PythonCodeBlockParser(),
        CodeBlockParser(language="bash", evaluator=_run_bash),
        CodeBlockParser(language="toml", evaluator=_check_config),
        SkipParser(),
    ],
    patterns=["README.md"],
    setup=_setup,
    teardown=_teardown,
).pytest()
