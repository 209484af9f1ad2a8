"""The notebook entry points on the top-level package: `%load_ext lev_nb` and `run.widget()`."""

from __future__ import annotations

from pathlib import Path

from support import ROOT

import lev_nb


def test_load_ext_lev_nb_registers_the_magics() -> None:
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "lev_nb")
    assert "lev" in ip.magics_manager.magics["line"]
    assert {"lev", "rhai"} <= set(ip.magics_manager.magics["cell"])
    graph = ip.run_line_magic("lev", f"graph {ROOT / 'blueprints' / 'triage'}")
    assert set(graph._repr_mimebundle_()) == {"text/vnd.mermaid", "text/plain"}


def test_run_widget_follows_the_run(tmp_path: Path) -> None:
    run = lev_nb.run(ROOT / "blueprints" / "triage", "R-1", model="mock", home=tmp_path).wait(30)
    widget = run.widget()
    assert repr(widget) == f"<RunWidget {run.run_id} complete>"
    assert "width:100%" in widget.progress.value
    # No stages given: the view knows the blueprint's, unvisited ones included.
    assert "table_after_error" in widget.progress.value
