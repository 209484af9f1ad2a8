"""A pytest plugin (loaded with -p, see pyproject.toml) holding nbval settings for the example
notebooks, which run with --nbval-lax: only cells marked NBVAL_CHECK_OUTPUT are compared, after
notebooks/sanitize.cfg has replaced run ids, timestamps, durations and temporary paths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

SANITIZE = Path(__file__).resolve().parents[1] / "notebooks" / "sanitize.cfg"


def pytest_configure(config: Any) -> None:
    option = config.option
    if getattr(option, "nbval_sanitize_with", "unset") is None:
        option.nbval_sanitize_with = str(SANITIZE)


def pytest_collectstart(collector: Any) -> None:
    # JupyterLab writes the SVG it drew back into a saved notebook; the kernel never produces it.
    if getattr(collector, "fspath", None) and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("image/svg+xml", "stderr")
