"""nbval settings for the example notebooks (run with --nbval-lax: only marked cells are compared)."""

from __future__ import annotations

from typing import Any


def pytest_collectstart(collector: Any) -> None:
    # JupyterLab writes the SVG it drew back into a saved notebook; the kernel never produces it.
    if getattr(collector, "fspath", None) and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("image/svg+xml", "stderr")
