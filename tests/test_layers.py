"""The package's architecture as tests: layers point one way, and facts stated once stay stated once."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_layer_contract_holds(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """pyproject.toml's import-linter contract: cli/notebook -> engine -> ... -> rhai, never upward."""
    lint = pytest.importorskip("importlinter.cli")
    monkeypatch.chdir(ROOT)
    status = lint.lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True)
    report = capsys.readouterr().out
    assert status == 0, report


def test_the_package_version_is_the_project_version() -> None:
    from lev_nb.version import __version__

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["version"] == __version__
