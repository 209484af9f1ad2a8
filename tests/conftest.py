"""Fixtures shared by every test folder: no real model, a private LEV_HOME, no user configuration,
a working directory, the ``engine`` run harness and the ``write_allowed`` header. Plain helpers live
in support.py."""

from __future__ import annotations

import subprocess
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from isolated_session import MODEL_KEYS, NO_TITLES, config_env_names
from support import AGENT_HEADER, Lev, RunHarness


@pytest.fixture(autouse=True)
def _no_real_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never reach a real model: a key in the developer's shell must not leak into a run."""
    for name in MODEL_KEYS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _closed_circuits() -> Iterator[None]:
    """Every test starts with every model's circuit breaker closed (they are process-wide)."""
    from lev_nb.providers.circuit import CIRCUITS

    CIRCUITS.reset()
    yield
    CIRCUITS.reset()


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with no configuration from the environment and no session overrides
    (``lev_nb.configure``), and leaves none behind."""
    from lev_nb.settings.loader import clear_session

    for name in config_env_names():
        monkeypatch.delenv(name, raising=False)
    # A generated title is one more model call, made beside the run's own: it would take replies
    # queued for the stages from every stand-in. Only the title tests turn titles back on.
    monkeypatch.setenv(NO_TITLES, "false")
    clear_session()
    yield
    clear_session()


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


@pytest.fixture
def engine(home: Path, workdir: Path) -> RunHarness:
    """Run blueprints from TOML text: ``run, model = engine.run(toml, [turns...])``."""
    return RunHarness(home=home, workdir=workdir)


@pytest.fixture
def blueprint_permissions(home: Path) -> Path:
    """This machine honours blueprints' own [tool_permissions] above the built-in defaults, as a user
    allows with ``[security] allow_blueprint_permissions = true`` in $LEV_HOME/config.toml."""
    home.mkdir(parents=True, exist_ok=True)
    config = home / "config.toml"
    config.write_text("[security]\nallow_blueprint_permissions = true\n", encoding="utf-8")
    return config


@pytest.fixture
def write_allowed(blueprint_permissions: Path) -> Callable[[str], str]:
    """Prefix a blueprint body with an agent header that lets write_file/edit_file run unattended
    (on a machine that honours a blueprint's permissions)."""

    def wrap(body: str) -> str:
        header = AGENT_HEADER + '[tool_permissions]\nwrite_file = "allow"\nedit_file = "allow"\n'
        return header + textwrap.dedent(body).strip() + "\n"

    return wrap
