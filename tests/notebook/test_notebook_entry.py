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
    assert set(graph._repr_mimebundle_()) == {"text/vnd.mermaid", "text/plain", "image/svg+xml"}


def test_run_widget_follows_the_run(tmp_path: Path) -> None:
    run = lev_nb.run(ROOT / "blueprints" / "triage", "R-1", model="mock", home=tmp_path).wait(30)
    widget = run.widget()
    assert repr(widget) == f"<RunWidget {run.run_id} complete>"
    assert "width:100%" in widget.progress.value
    # No stages given: the view knows the blueprint's, unvisited ones included.
    assert "table_after_error" in widget.progress.value


def test_run_graph_draws_the_path_the_run_took(tmp_path: Path) -> None:
    from lev_nb.blueprint.graph import run_mermaid
    from lev_nb.notebook import run_graph

    bp = lev_nb.load(ROOT / "blueprints" / "triage")
    run = bp.run("R-1", model="mock", home=tmp_path).wait(30)
    diagram = run_graph(run)
    bundle = diagram._repr_mimebundle_()
    assert set(bundle) == {"text/vnd.mermaid", "text/plain", "image/svg+xml"}
    assert bundle["text/vnd.mermaid"] == run_mermaid(bp, ["read", "check", "table"], status="complete")
    assert "class s_table finished" in bundle["text/plain"] and "linkStyle" in bundle["text/plain"]


def test_run_graph_of_a_text_blueprint_works_too(tmp_path: Path) -> None:
    from lev_nb.notebook import run_graph

    text = (ROOT / "blueprints" / "triage" / "agent.leviath").read_text(encoding="utf-8")
    run = lev_nb.load(text).run("R-1", model="mock", home=tmp_path).wait(30)
    assert "class s_table finished" in run_graph(run)._repr_mimebundle_()["text/plain"]
