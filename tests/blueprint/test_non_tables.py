"""The upstream's leniency on a non-table where a table belongs (spec/blueprint.md §2): the value reads
as an empty table, and the lints then say what the blueprint left undeclared."""

from __future__ import annotations

import pytest

from lev_nb.blueprint import BlueprintError, LintEnv, load
from lev_nb.scripting.checks import validate


def findings(text: str) -> list[tuple[str, str, str | None]]:
    report = validate(text, env=LintEnv.default())
    assert report.error is None, report.error
    return [(f.code, f.severity, f.stage) for f in report.findings]


@pytest.mark.parametrize("value", ["3", '"coder"', "[1, 2]", "true"])
def test_a_non_table_agent_is_an_unnamed_agent(value: str) -> None:
    bp = load(f"agent = {value}\n")
    assert (bp.agent.name, bp.agent.version, bp.agent.description) == ("unnamed", "0.1.0", "")
    assert list(bp.stages) == ["main"]


def test_a_missing_agent_is_still_refused() -> None:
    with pytest.raises(BlueprintError, match=r"Missing \[agent\] section"):
        load('[stages.a]\nmode = "autonomous"\n')


def test_a_non_table_stage_is_a_default_stage_with_its_warnings() -> None:
    text = '[agent]\nname = "x"\n[stages]\nwork = 5\n'
    stage = load(text).stages["work"]
    assert stage.mode == "autonomous" and stage.max_iterations is None
    assert stage.models[0].spec == "anthropic/claude-sonnet-4-6"
    assert findings(text) == [("stage-missing-mode", "warning", "work"), ("stage-missing-model", "warning", "work"),
                              ("stage-missing-max-iterations", "warning", "work")]


def test_non_table_stages_keep_their_order_among_tables() -> None:
    text = ('[agent]\nname = "x"\n[stages]\nfirst = "later"\n'
            '[stages.second]\nmode = "output"\nmodel = { provider = "anthropic", model = "claude-sonnet-4-6" }\n'
            'max_iterations = 2\n')
    assert list(load(text).stages) == ["first", "second"]


def test_the_implicit_stage_declares_everything_but_max_iterations() -> None:
    # `agent = 3` reads as an agent with every default, and lev_nb says the value was ignored.
    assert findings('agent = 3\n') == [("wrong-type", "warning", None),
                                        ("stage-missing-max-iterations", "warning", "main")]


def test_non_table_transitions_read_as_absent() -> None:
    bp = load('[agent]\nname = "x"\n[stages.a]\ntransitions = 5\n[stages.b]\ntransitions = {}\n')
    assert bp.stages["a"].transitions is None and bp.stages["b"].transitions == {}
