"""The mock model walks every valid fixture blueprint (and every bundled one) to a terminal status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import BLUEPRINTS, FIXTURES, ROOT, RUN_TIMEOUT_S

from lev_nb.blueprint import load
from lev_nb.scripting.checks import validate
from lev_nb.engine.api import start_run

ALL_AGENTS = sorted(
    list(FIXTURES.rglob("agent.leviath")) + list(BLUEPRINTS.rglob("agent.leviath"))
)
# Blueprints `lev validate` refuses are not expected to run (tests/fixtures/invalid, error lints).
AGENTS = [path for path in ALL_AGENTS if validate(path.parent).valid]
TERMINAL = {"complete", "error", "cancelled"}


def test_there_are_fixtures_to_walk():
    assert len(AGENTS) > 10
    assert any("upstream" in str(path) for path in AGENTS)


@pytest.mark.parametrize("manifest", AGENTS, ids=lambda p: str(p.parent.relative_to(ROOT)))
def test_mock_model_walks_the_blueprint_to_its_end(manifest: Path, home: Path, workdir: Path):
    bp = load(manifest.parent)
    # Give every required caller input a value, as a user launching the agent has to.
    inputs = {i.key: f"sample {i.key}" for i in bp.inputs if i.required and i.key != "task"}
    # ...and a task only where one is taken (a blueprint whose inputs leave out the task refuses it).
    task = "dry run" if bp.accepts_task or not bp.inputs else ""
    run = start_run(bp, task=task, model="mock", workdir=workdir, home=home, **inputs)
    run.wait(RUN_TIMEOUT_S)
    assert run.status in TERMINAL
    # A clean dry run finishes; an error must at least say why. A checkpoint that insists on a
    # person (unattended = "ask") cannot pass in an unattended run, and says so.
    asks = any(p.unattended == "ask" for st in bp.stages.values() for p in st.interaction_points
               if st.mode == "interactive_points")
    if asks:
        assert run.status == "error" and "asks a person" in run.error
        return
    assert run.status == "complete", run.error
    assert run.stage_history and run.stage_history[0] == load(manifest.parent).entry_stage
    meta = json.loads((Path(run.run_dir) / "meta.json").read_text())
    assert meta["status"] == run.status
    for child_id in meta["children"]:
        child = json.loads((home / "runs" / child_id / "meta.json").read_text())
        assert child["status"] in TERMINAL
        assert child["parent_run_id"] == run.run_id


@pytest.mark.parametrize("name", sorted(p.parent.name for p in BLUEPRINTS.glob("*/agent.leviath")))
def test_a_dry_run_of_a_bundled_agent_reads_as_a_healthy_run(name: str, home: Path, workdir: Path):
    # The mock does what each stage asks for (required regions, gated regions, a file change, the
    # answer), so no gate blocks or is forced, nothing is nudged and nothing warns. The launch
    # allows the tools that ask: nobody can approve a file change in a dry run, and each denial
    # would be told (tool-denied-unattended).
    run = start_run(load(BLUEPRINTS / name), task="dry run", model="mock", workdir=workdir, home=home,
                    allow=["write_file", "edit_file", "shell"])
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    unhealthy = [(e.kind, e.stage) for e in run.events.snapshot()
                 if e.kind in ("gate_blocked", "gate_forced", "nudge", "warning", "stuck", "error", "max_iterations",
                               "output_rejected")]
    assert unhealthy == []
    assert run.flags["gates_forced"] == 0 and run.flags["output_forced"] == 0
    assert run.result is not None
