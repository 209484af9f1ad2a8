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
    assert 's_end("end · output")' in text
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


def test_blueprint_displays_as_mermaid_plain_text_and_a_graphviz_svg() -> None:
    bp = load(ROOT / "blueprints" / "triage")
    bundle = bp._repr_mimebundle_()
    assert set(bundle) == {"text/vnd.mermaid", "text/plain", "image/svg+xml"}
    assert bundle["text/vnd.mermaid"] == bp.mermaid() == bundle["text/plain"]


# -- readable in a notebook (issue 9) ----------------------------------------------------------
def _labels(text: str) -> list[str]:
    import re

    return re.findall(r'\|"(.*?)"\|', text)


@pytest.mark.parametrize("agent", BUNDLED)
def test_bundled_edge_labels_are_short_and_cut_hints_are_in_the_note(agent: str) -> None:
    from lev_nb.blueprint.graph import EDGE_LABEL_SLACK, LEGEND_ID, MAX_EDGE_LABEL

    bp = load(ROOT / "blueprints" / agent)
    text = blueprint_mermaid(bp)
    for label in _labels(text):
        hint = label.split(" · ")[0]
        assert len(hint) <= MAX_EDGE_LABEL + EDGE_LABEL_SLACK, label
    hints = [edge.hint for stage in bp.stages.values() for edge in stage.edges if edge.hint]
    cut = [h for h in hints if len(h) > MAX_EDGE_LABEL + EDGE_LABEL_SLACK]
    note = next((line for line in text.splitlines() if line.strip().startswith(f"{LEGEND_ID}[")), "")
    for number, hint in enumerate(cut, start=1):
        assert f"[{number}]" in note and hint in note.replace("#quot;", '"')
    assert bool(cut) == bool(note)
    if cut:  # the note hangs under the graph by an invisible link, adding no width
        assert f"~~~ {LEGEND_ID}" in text


def test_short_hint_cuts_at_a_word() -> None:
    from lev_nb.blueprint.graph import short_hint

    assert short_hint("Every report has a label") == "Every report has a label"
    assert short_hint("Some reports were not labelled yet; keep going") == "Some reports were not…"
    assert short_hint("The sub-questions are listed") == "The sub-questions are listed"  # barely over
    assert short_hint("x" * 40, 10) == "x" * 9 + "…"


def _luminance(hex_colour: str) -> float:
    rgb = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def test_class_colours_set_text_colour_with_enough_contrast() -> None:
    """A fill without a text colour takes the theme's text (light in a dark theme): every class
    that sets a fill sets its text colour too, at WCAG AA contrast (4.5:1)."""
    from lev_nb.blueprint.graph import CLASS_STYLES

    for name, style in CLASS_STYLES.items():
        props = dict(part.split(":", 1) for part in style.split(","))
        assert ("fill" in props) == ("color" in props), name
        if "fill" in props:
            light, dark = sorted((_luminance(props["fill"]), _luminance(props["color"])), reverse=True)
            assert (light + 0.05) / (dark + 0.05) >= 4.5, name
    text = blueprint_mermaid(load(ROOT / "blueprints" / "research-brief"))
    for name, style in CLASS_STYLES.items():
        assert f"classDef {name} {style}" in text


def test_direction_defaults_to_top_down_and_layout_is_elk() -> None:
    from lev_nb.blueprint.graph import default_direction

    big = load(ROOT / "blueprints" / "code-fixer")
    small = load("[agent]\nname = \"s\"\n[stages.a]\nmode = \"autonomous\"\n[stages.b]\nmode = \"output\"\n")
    assert default_direction(big) == "TB" and default_direction(small) == "LR"
    assert "\nflowchart TB\n" in big.mermaid() and "\nflowchart LR\n" in small.mermaid()
    assert "\nflowchart RL\n" in big.mermaid(direction="RL")
    head = big.mermaid().split("\n---\n", 1)[0]
    assert "defaultRenderer: elk" in head and head.startswith('---\ntitle: "code-fixer"\nconfig:')


def test_run_path_marks_visited_stages_taken_edges_and_the_end() -> None:
    from lev_nb.blueprint.graph import PATH_LINK_STYLE, run_mermaid

    bp = load(ROOT / "blueprints" / "triage")
    text = run_mermaid(bp, ["read", "check", "table"], status="complete")
    lines = text.splitlines()
    assert "\tclass s_read,s_check,s_table visited" in lines
    assert "\tclass s_table finished" in lines
    links = [line.strip() for line in lines if "-->" in line or "-.->" in line or "==>" in line]
    (style,) = [line for line in lines if line.strip().startswith("linkStyle")]
    taken = [links[int(i)] for i in style.split()[1].split(",")]
    assert taken == [
        "lev_start --> s_read", 's_read -->|"Every report has a label · gated"| s_check',
        's_check -->|"The labels are right"| s_table', "s_table --> lev_done",
    ]
    assert style.strip().endswith(PATH_LINK_STYLE)

    failed = run_mermaid(bp, ["read", "table_after_error"], status="error")
    assert "\tclass s_table_after_error failed" in failed.splitlines()
    assert "lev_done" not in failed.split("linkStyle")[1]
    running = run_mermaid(bp, ["read", "check"])
    assert "\tclass s_check current" in running.splitlines()


def test_run_path_through_a_fan_out_marks_the_worker() -> None:
    from lev_nb.blueprint.graph import run_mermaid

    bp = load(ROOT / "blueprints" / "research-brief")
    text = run_mermaid(bp, ["scope", "split", "synthesize", "write"], status="complete")
    visited = next(line for line in text.splitlines() if line.endswith(" visited"))
    assert "s_investigate" in visited
    links = [line.strip() for line in text.splitlines() if "-->" in line or "==>" in line or "-.->" in line]
    style = next(line for line in text.splitlines() if line.strip().startswith("linkStyle"))
    taken = [links[int(i)] for i in style.split()[1].split(",")]
    assert 's_split ==>|"fan out"| s_investigate' in taken and 's_investigate ==>|"results"| s_synthesize' in taken


def test_stages_to_end_counts_stages_left_along_model_edges() -> None:
    from lev_nb.blueprint.graph import stages_to_end

    assert stages_to_end(load(ROOT / "blueprints" / "triage")) == {
        "read": 2, "check": 1, "table": 0, "table_after_error": 0,
    }
    assert stages_to_end(load(ROOT / "blueprints" / "research-brief")) == {
        "scope": 3, "split": 2, "synthesize": 1, "write": 0,
    }
