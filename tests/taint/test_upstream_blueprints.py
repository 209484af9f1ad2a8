"""The upstream's own blueprints that use taint tracking (its manifest tests of ``[security]``,
copied as fixtures) validate here as they parse there, and resolve as the upstream's cascade says:
a stage's own setting over the agent's, the machine-wide switch over both, never switched off by
a blueprint."""

from __future__ import annotations

import pytest
from support import FIXTURES, Lev

from lev_nb.blueprint.loader import load
from lev_nb.engine.plan.build import plan_from_blueprint

TAINT = FIXTURES / "taint"


@pytest.mark.parametrize("name", ["agent-and-stage", "empty-block", "on", "off"])
def test_the_upstream_blueprint_validates(lev: Lev, name: str) -> None:
    done = lev("validate", str(TAINT / name))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "taint-tracking" not in done.stdout  # no finding about taint tracking any more


def _on(name: str, machine: bool = False) -> dict[str, bool]:
    plan = plan_from_blueprint(load(TAINT / name))
    return {s.name: plan.tracks_taint(s, machine) for s in plan.stages}


def test_stage_over_agent_and_the_machine_over_both() -> None:
    assert _on("agent-and-stage") == {"plan": False, "build": True}
    assert _on("agent-and-stage", machine=True) == {"plan": True, "build": True}
    assert _on("empty-block") == {"main": True}  # a block that says nothing is on
    assert plan_from_blueprint(load(TAINT / "on")).taint_tracking is True
    assert plan_from_blueprint(load(TAINT / "off")).taint_tracking is False


def test_a_taint_tracking_that_is_not_true_or_false_is_an_error_naming_the_table(lev: Lev, tmp_path) -> None:
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "agent.leviath").write_text(
        '[agent]\nname = "x"\n[security]\ntaint_tracking = "yes"\n[stages.main]\nmode = "autonomous"\n'
        '[stages.main.security]\ntaint_tracking = 1\n[stages.done]\nsecurity = { taint_tracking = false }\n')
    done = lev("validate", str(folder), "--json")
    import json

    found = [(f["code"], f["severity"], f["stage"]) for f in json.loads(done.stdout)["findings"]
             if f["code"] == "taint-tracking-invalid"]
    assert found == [("taint-tracking-invalid", "error", None), ("taint-tracking-invalid", "error", "main")]
    assert done.returncode == 1
    assert "[stages.main.security] taint_tracking = 1" in lev("validate", str(folder)).stdout
