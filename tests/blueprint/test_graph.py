"""The blueprint as a Mermaid flowchart: snapshots of the bundled agents, and the rules one by one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support import ROOT, SNAPSHOTS, Lev

from lev_nb.blueprint import load
from lev_nb.blueprint.graph import blueprint_mermaid, escape_label

BUNDLED = sorted(p.name for p in (ROOT / "blueprints").iterdir() if (p / "agent.leviath").is_file())


@pytest.mark.parametrize("agent", BUNDLED)
def test_bundled_agent_graph_matches_snapshot(agent: str) -> None:
    text = blueprint_mermaid(load(ROOT / "blueprints" / agent))
    snapshot = SNAPSHOTS / f"{agent}.mmd"
    if os.environ.get("LEV_UPDATE_SNAPSHOTS") or not snapshot.exists():
        snapshot.write_text(text, encoding="utf-8")
    assert text == snapshot.read_text(encoding="utf-8")


def test_output_is_deterministic() -> None:
    bp = load(ROOT / "blueprints" / "code-fixer")
    assert blueprint_mermaid(bp) == blueprint_mermaid(load(ROOT / "blueprints" / "code-fixer"))


GRAPH = """
[agent]
name = "g"
entry_stage = "plan"
[stages.start]
mode = "autonomous"
[stages.start.transitions]
[stages.plan]
mode = "autonomous"
[stages.plan.transitions.end]
hint = "The plan is \\"ready\\""
[stages.plan.transitions.fix]
condition = "stuck"
stuck_after_iterations = 5
stuck_after_same_file_edits = 2
[stages.end]
mode = "output"
[stages.end.transitions]
[stages.fix]
mode = "autonomous"
[stages.fix.transitions.plan]
hint = "retry"
gate = { require_modifications = true }
transform = "compact"
[stages.fix.transitions.end]
condition = "error"
"""


def test_a_stage_named_end_gets_a_safe_id() -> None:
    text = blueprint_mermaid(load(GRAPH))
    assert 's_end(["end · output"])' in text
    # no bare `end` token as a node id anywhere
    assert not any(line.strip().startswith("end") for line in text.splitlines())


def test_entry_stage_is_marked_and_linked_from_start() -> None:
    text = blueprint_mermaid(load(GRAPH))
    assert "lev_start --> s_plan" in text
    assert "class s_plan entry" in text


def test_hint_edges_are_solid_and_labelled_with_escaped_hint() -> None:
    text = blueprint_mermaid(load(GRAPH))
    assert 's_plan -->|"The plan is #quot;ready#quot;"| s_end' in text


def test_condition_edges_are_dotted_and_labelled() -> None:
    text = blueprint_mermaid(load(GRAPH))
    assert 's_plan -.->|"stuck: 5 turns, 2 edits"| s_fix' in text
    assert 's_fix -.->|"error"| s_end' in text


def test_gate_and_transform_show_on_the_edge() -> None:
    text = blueprint_mermaid(load(GRAPH))
    assert 's_fix -->|"retry · gated · compact"| s_plan' in text


def test_output_and_terminal_stages_are_distinguishable() -> None:
    text = blueprint_mermaid(load(GRAPH))
    assert "class s_end output" in text
    terminal = next(line for line in text.splitlines() if line.strip().startswith("class") and line.endswith("terminal"))
    assert "s_end" in terminal and "s_start" in terminal and "s_plan" not in terminal
    assert "s_end --> lev_done" in text


def test_fan_out_stage_draws_to_worker_and_merge() -> None:
    text = blueprint_mermaid(load(ROOT / "blueprints" / "research-brief"))
    assert 's_split ==>|"fan out"| s_investigate' in text
    assert 's_investigate ==>|"results"| s_synthesize' in text
    assert "class s_split fanout" in text
    # neither the fan-out stage nor its worker ends the run
    assert "s_split --> lev_done" not in text and "s_investigate --> lev_done" not in text


def test_worker_agent_is_drawn_as_an_external_agent() -> None:
    bp = load("""
[agent]
name = "w"
[stages.split]
mode = "fan_out"
worker_agent = "researcher"
merge_stage = "merge"
[stages.split.transitions]
[stages.merge]
mode = "autonomous"
""")
    text = blueprint_mermaid(bp)
    assert 'agent_researcher[["agent: researcher"]]' in text
    assert "s_split ==>|\"fan out\"| agent_researcher" in text
    assert "agent_researcher ==>|\"results\"| s_merge" in text


def test_linear_fall_through_is_drawn() -> None:
    bp = load("""
[agent]
name = "lin"
[stages.a]
mode = "autonomous"
[stages.b]
mode = "autonomous"
""")
    text = blueprint_mermaid(bp)
    assert "s_a --> s_b" in text and "s_b --> lev_done" in text


def test_names_that_collide_after_sanitising_get_distinct_ids() -> None:
    bp = load("""
[agent]
name = "c"
[stages."a-b"]
mode = "autonomous"
[stages.a_b]
mode = "autonomous"
""")
    text = blueprint_mermaid(bp)
    assert 's_a_b["a-b"]' in text and 's_a_b_2["a_b"]' in text


def test_current_stage_is_highlighted() -> None:
    text = blueprint_mermaid(load(GRAPH), current="fix")
    assert "class s_fix current" in text


def test_escape_label_flattens_and_shortens() -> None:
    assert escape_label('a\n"b"') == "a #quot;b#quot;"
    assert escape_label("x" * 100).endswith("…") and len(escape_label("x" * 100)) == 60


def test_lev_graph_prints_the_flowchart(lev: Lev) -> None:
    out = lev("graph", str(ROOT / "blueprints" / "triage"))
    assert out.returncode == 0
    assert out.stdout == blueprint_mermaid(load(ROOT / "blueprints" / "triage"))


def test_lev_graph_reports_a_bad_blueprint_on_one_line(tmp_path: Path, lev: Lev) -> None:
    (tmp_path / "agent.leviath").write_text("[agent\nname='x'", encoding="utf-8")
    out = lev("graph", str(tmp_path))
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1 and "agent.leviath" in out.stderr


def test_lev_validate_graph_appends_the_flowchart(lev: Lev) -> None:
    out = lev("validate", str(ROOT / "blueprints" / "triage"), "--graph")
    assert out.returncode == 0
    assert out.stdout.endswith(blueprint_mermaid(load(ROOT / "blueprints" / "triage")))


def test_blueprint_displays_as_mermaid_and_plain_text_only() -> None:
    bp = load(ROOT / "blueprints" / "triage")
    bundle = bp._repr_mimebundle_()
    assert set(bundle) == {"text/vnd.mermaid", "text/plain"}
    assert bundle["text/vnd.mermaid"] == bp.mermaid() == bundle["text/plain"]
