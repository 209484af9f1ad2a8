"""Notebook views: rich displays, the live run widget, the blueprint designer and the magics
(%lev, %%lev, %%blueprint, %%rhai).

``%load_ext lev_nb.notebook`` registers the magics; ``watch(run)`` shows a run live;
``run_graph(run)`` draws the path a run took through its blueprint's graph.
"""

from __future__ import annotations

from typing import Any

__all__ = ["load_ipython_extension", "watch", "run_graph"]


def watch(run: Any, stages: Any = None, display: bool = True) -> Any:
    """Show ``run`` live (a RunWidget, or a text view without ipywidgets) and return the view."""
    from lev_nb.notebook.widget import watch as _watch

    return _watch(run, stages=stages, display=display)


def run_graph(run: Any, direction: str | None = None) -> Any:
    """The blueprint's graph with the path ``run`` took (the same as ``run.graph()``): visited
    stages, the edges taken and where it is (or how it ended); a Mermaid diagram drawn offline."""
    return run.graph(direction)


def load_ipython_extension(ipython: Any) -> None:
    """Register the lev_nb magics in ``ipython`` (called by ``%load_ext lev_nb.notebook``)."""
    from lev_nb.notebook.magics import load_ipython_extension as _load

    _load(ipython)
