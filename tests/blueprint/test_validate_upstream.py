"""The seven bundled upstream agents (re-created in tests/fixtures/upstream from spec §11) lint as §11 says."""

from __future__ import annotations

from collections import Counter

import pytest
from support import FIXTURES

from lev_nb.blueprint import load
from lev_nb.scripting.checks import validate

UPSTREAM = FIXTURES / "upstream"

# agent -> (unbounded-percentage-budget count, model named in the message, notes)
EXPECTED = {
    "coder": (8, "openai/gpt-5.5", {"command-seed": "repo_files: git ls-files (pre-approved)"}),
    "data-analyst": (3, "google/gemini-3.5-flash", {"tool-seed": "environment: current_time, locale_info"}),
    "deep-researcher": (5, "openai/gpt-5.5", {"tool-seed": "environment: current_time, locale_info"}),
    "log-analyzer": (6, "openai/gpt-5.5", {}),
    "researcher": (5, "openai/gpt-5.5", {"tool-seed": "environment: current_time, locale_info"}),
    "reviewer": (4, "openai/gpt-5.5", {"command-seed": "repo_files: git ls-files (pre-approved)"}),
    "wide-researcher": (4, "openai/gpt-5.5", {"tool-seed": "environment: current_time, locale_info"}),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bundled_agent_lints_as_upstream(name: str) -> None:
    count, model, notes = EXPECTED[name]
    report = validate(UPSTREAM / name, deny_warnings=False)
    assert report.valid and report.errors == 0
    # permission-capped notes depend on the configuration (lev_nb's own; tested in test_lints_own).
    codes = Counter(c for c in report.codes if c != "permission-capped")
    assert codes == Counter({"unbounded-percentage-budget": count, **{code: 1 for code in notes}})
    for finding in report.by_code("unbounded-percentage-budget"):
        assert f" on {model} (" in finding.message and finding.stage is None
    for code, text in notes.items():
        (note,) = report.by_code(code)
        assert note.severity == "note" and note.message.startswith("1 region(s)") and text in note.message
    assert not validate(UPSTREAM / name, deny_warnings=True).valid


def test_coder_flags_the_eight_named_regions_in_declaration_order() -> None:
    report = validate(UPSTREAM / "coder")
    names = [f.message.split("'")[1] for f in report.by_code("unbounded-percentage-budget")]
    assert names == ["codebase", "implementation", "decisions", "changelog", "test_results", "errors",
                     "conversation", "scratch"]


def test_reviewer_takes_no_task_but_a_required_diff() -> None:
    data = validate(UPSTREAM / "reviewer").to_dict()["blueprint"]
    assert data["accepts_task"] is False
    assert data["inputs"] == [{"key": "diff", "region": "diff", "required": True},
                              {"key": "criteria", "region": "review_criteria", "required": False}]


def test_data_analyst_inputs_and_fan_out_shape() -> None:
    bp = load(UPSTREAM / "data-analyst")
    assert bp.accepts_task and [(i.key, i.region) for i in bp.inputs] == [("task", "subject"),
                                                                         ("constraints", "constraints")]
    split = bp.stages["split"]
    assert split.mode == "fan_out" and split.worker_target == ("worker_stage", "gather_worker")
    assert split.merge_stage == "build" and split.max_items == 30 and "fan_out" in split.available_tools
    assert bp.stages["present"].allow_complete and bp.stages["present"].require_output
    assert bp.terminal_stages == ["gather_worker", "present"]


def test_coder_graph_features_are_modelled() -> None:
    bp = load(UPSTREAM / "coder")
    plan = bp.stages["plan"]
    (point,) = plan.interaction_points
    assert point.style == "multiple_choice" and point.abort_options == ["Abort"]
    assert point.document_region == "plan" and "Revise" in point.directives
    stuck = bp.stages["implement"].transitions["reassess"]
    assert stuck.condition == "stuck" and stuck.stuck_thresholds == {
        "stuck_after_iterations": 20, "stuck_after_minutes": 15, "stuck_after_same_file_edits": 5}
    assert stuck.transform == "custom" and stuck.transform_config.carry == ["plan", "baseline"]
    gate = bp.stages["implement"].transitions["review"].gate
    assert gate.require_modifications and gate.region == "implementation" and gate.attempts == 3
    assert bp.stages["implement"].transitions["plan"].gate.attempts == 1
    assert bp.layout_for("plan")["repo_files"].seed.kind == "command"
