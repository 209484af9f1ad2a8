"""A pytest plugin (loaded with -p, see pyproject.toml) holding nbval settings for the example
notebooks, which run with --nbval-lax: only cells marked NBVAL_CHECK_OUTPUT are compared."""

from __future__ import annotations

from typing import Any


def pytest_collectstart(collector: Any) -> None:
    # JupyterLab writes the SVG it drew back into a saved notebook; the kernel never produces it.
    if getattr(collector, "fspath", None) and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("image/svg+xml", "stderr")
