"""Interaction points in an unattended run: auto_approve passes, ask ends the run in error."""

from __future__ import annotations

from pathlib import Path

import lev_nb
from lev_nb.providers import ScriptedModel


POINTS = """
[agent]
name = "points"
[stages.plan]
mode = "interactive_points"
model = {{ provider = "anthropic", model = "claude-sonnet-4-6" }}
max_iterations = 3
[[stages.plan.interaction_points]]
name = "approve_plan"
prompt = "Approve the plan?"
unattended = "{unattended}"
[stages.plan.transitions]
"""


def test_auto_approve_checkpoint_passes_unattended(tmp_path: Path) -> None:
    bp = lev_nb.load(POINTS.format(unattended="auto_approve"))
    r = bp.run("t", model=ScriptedModel([{"text": "the plan"}]), home=tmp_path).wait(30)
    assert r.status == "complete"
    assert any("approve_plan" in e.message for e in r.events if e.kind == "warning")


def test_ask_checkpoint_ends_an_unattended_run_in_error(tmp_path: Path) -> None:
    bp = lev_nb.load(POINTS.format(unattended="ask"))
    r = bp.run("t", model=ScriptedModel([{"text": "the plan"}]), home=tmp_path).wait(30)
    assert r.status == "error" and "approve_plan" in r.error and "auto_approve" in r.error
