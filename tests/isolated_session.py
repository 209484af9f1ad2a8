"""A pytest plugin, loaded with -p for every run (pyproject.toml), so its rules hold whatever is
collected: the whole suite, one notebook, one test file. Every kernel, ``lev`` command and server
the session starts inherits this environment.

- No test writes into a user's run store (~/.lev, ./.lev): the session gets a LEV_HOME of its own.
- No test leaves folders in the system's temp dir: the example notebooks copy their samples into
  tempfile.mkdtemp() folders, and every process the session starts makes its temporary files in a
  folder removed when the session ends. (This process keeps the temp dir it already knows, where
  pytest's own tmp_path folders live.)
- No test reads the developer's configuration (a LEV_CONFIG file, a setting exported in the shell),
  reaches a real model (an API key in the shell) or traces to the developer's collector (OTEL_*).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

# [title] enabled: off for the suite (tests/engine/test_run_titles.py turns it on).
NO_TITLES = "LEV_TITLE_ENABLED"
# The variables through which a run would reach a real model.
MODEL_KEYS = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY",
              "OPENAI_BASE_URL", "OPENROUTER_API_KEY", "OPENROUTER_BASE_URL", "OLLAMA_HOST")

_made: list[str] = []


def config_env_names() -> list[str]:
    """The environment variables lev_nb reads its configuration from."""
    from lev_nb.settings.paths import CONFIG_ENV, UPSTREAM_CONFIG_ENV, UPSTREAM_HOME_ENV
    from lev_nb.settings.schema import ENVIRONMENT

    return [CONFIG_ENV, UPSTREAM_CONFIG_ENV, UPSTREAM_HOME_ENV, *(var for var, _ in ENVIRONMENT)]


def pytest_configure(config: Any) -> None:
    tempfile.gettempdir()  # this process's temp dir, known before TMPDIR changes below
    home = tempfile.mkdtemp(prefix="lev-test-home-")
    scratch = tempfile.mkdtemp(prefix="lev-test-tmp-")
    _made.extend((home, scratch))
    os.environ["LEV_HOME"] = home
    os.environ["TMPDIR"] = scratch
    for name in (*config_env_names(), *MODEL_KEYS, *[n for n in os.environ if n.startswith("OTEL_")]):
        os.environ.pop(name, None)
    os.environ[NO_TITLES] = "false"


def pytest_unconfigure(config: Any) -> None:
    for folder in _made:
        shutil.rmtree(folder, ignore_errors=True)
    _made.clear()
