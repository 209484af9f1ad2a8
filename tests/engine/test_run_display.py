"""How a run and its events read in a notebook or a terminal."""

from __future__ import annotations

from pathlib import Path

from support import ROOT

import lev_nb


def test_run_displays_a_summary_with_status_path_and_output(tmp_path: Path) -> None:
    run = lev_nb.run(ROOT / "blueprints" / "triage", "R-1: crash on save", model="mock", home=tmp_path).wait(30)
    bundle = run._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    plain = bundle["text/plain"]
    assert plain.startswith(f"triage · {run.run_id} · complete")
    assert "path: read → check → table" in plain
    assert "final output (csv) from table:" in plain
    assert "<table class='lev-table'" in bundle["text/html"] and run.run_id in bundle["text/html"]


def test_events_print_as_one_readable_line(tmp_path: Path) -> None:
    run = lev_nb.run(ROOT / "blueprints" / "triage", "R-1", model="mock", home=tmp_path).wait(30)
    lines = [str(e) for e in run.events]
    assert lines[0].startswith("run_started: agent=triage")
    assert "[read] stage_entered: visit=1" in lines
    assert all("\n" not in line for line in lines)
    transition = next(e for e in run.events if e.kind == "transition")
    assert str(transition).startswith("[read] transition: target=check")


def test_a_run_knows_its_blueprint_and_draws_the_path_it_took(tmp_path: Path) -> None:
    bp = lev_nb.load('[agent]\nname = "two"\n[stages.a]\n[stages.a.transitions]\nb = {}\n[stages.b]\n[stages.b.transitions]\n')
    run = bp.run("t", model="mock", home=tmp_path).wait(30)
    assert run.blueprint is bp  # a blueprint given as text too
    bundle = run.graph()._repr_mimebundle_()
    assert set(bundle) == {"text/vnd.mermaid", "text/plain", "image/svg+xml"}
    assert "s_a" in bundle["text/vnd.mermaid"] and "s_b" in bundle["text/vnd.mermaid"]
    worker_run = lev_nb.run(ROOT / "blueprints" / "triage", "R-1", model="mock", home=tmp_path).wait(30)
    assert worker_run.blueprint.name == "triage"
