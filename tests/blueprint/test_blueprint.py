"""The blueprint model and loader: defaults, sugar, lenient typing, API helpers, round trips."""

from __future__ import annotations

import tomllib
from pathlib import Path

import jsonschema
import pytest
from support import FIXTURES

from lev_nb.blueprint import (
    Blueprint,
    BlueprintError,
    Edge,
    Region,
    Stage,
    default_layout,
    json_schema,
    load,
    load_text,
)

ALL_FIXTURES = sorted(p.parent for p in FIXTURES.glob("*/*/agent.leviath"))


def _loads(path: Path) -> bool:
    try:
        load(path)
    except BlueprintError:
        return False
    return True


LOADABLE = [p for p in ALL_FIXTURES if _loads(p)]

MINIMAL = '[agent]\nname = "t"\n'


def test_missing_stages_gives_an_implicit_main_stage_and_default_layout() -> None:
    bp = load(MINIMAL)
    assert bp.stage_names == ["main"] and bp.entry_stage == "main"
    main = bp.stages["main"]
    assert main.mode == "autonomous" and main.models[0].spec == "anthropic/claude-sonnet-4-6"
    assert list(bp.global_layout) == ["system", "conversation"]
    assert sum(r.effective_max_tokens for r in bp.global_layout.values()) == 18000
    assert bp.layout_for("main") is bp.global_layout
    assert not bp.is_graph_mode and bp.terminal_stages == ["main"]
    assert bp.source_path is None and bp.base_dir is None and bp.raw == {"agent": {"name": "t"}}


def test_agent_defaults() -> None:
    agent = load(MINIMAL).agent
    assert (agent.name, agent.version, agent.description, agent.entry_stage) == ("t", "0.1.0", "", None)
    assert load('[agent]\n').agent.name == "unnamed"


def test_stage_order_is_first_appearance_and_edges_keep_declaration_order() -> None:
    bp = load(MINIMAL + '[stages.b.model]\nprovider = "openai"\nmodel = "gpt-5.5"\n'
              '[stages.a]\nmode = "autonomous"\n[stages.b]\nmode = "interactive"\n'
              '[stages.b.transitions.z]\n[stages.b.transitions.a]\nhint = "back"\n[stages.z]\n')
    assert bp.stage_names == ["b", "a", "z"] and bp.entry_stage == "b"
    assert list(bp.stages["b"].transitions) == ["z", "a"]
    assert bp.stages["b"].transitions["a"].hint == "back"
    assert bp.stages["a"].transitions is None and bp.is_graph_mode


def test_output_mode_sugar() -> None:
    bp = load(MINIMAL + '[stages.s]\nmode = "output"\navailable_tools = ["read_file"]\nrequire_output = false\n'
              '[stages.t]\nmode = "output"\nallow_complete = false\navailable_tools = ["submit_output"]\n')
    s, t = bp.stages["s"], bp.stages["t"]
    assert s.available_tools == ["read_file", "submit_output"] == s.effective_tools
    assert s.require_output is True and s.allow_complete is True
    assert t.allow_complete is False and t.available_tools == ["submit_output"]


def test_fan_out_sugar_and_keys_only_on_fan_out_stages() -> None:
    bp = load(MINIMAL + '[stages.f]\nmode = "fan_out"\nworker_agent = "researcher"\nmax_workers = 0\n'
              '[stages.g]\nmode = "autonomous"\nworker_agent = "ignored"\nmax_workers = -3\n')
    f, g = bp.stages["f"], bp.stages["g"]
    assert f.available_tools == ["fan_out"] and f.max_workers == 0 and f.worker_target == ("worker_agent", "researcher")
    assert f.max_attempts == 3 and f.on_worker_failure == "continue"
    assert g.worker_agent is None and g.max_workers == 30


def test_lenient_typing_treats_wrong_types_as_absent() -> None:
    bp = load(MINIMAL + '[stages.s]\nmode = 5\nmax_iterations = "ten"\navailable_tools = ["read_file", 3, true]\n'
              'allow_complete = "yes"\nsystem_prompt = "  trimmed  "\n'
              '[context.regions]\nnotes = { kind = "pinned", budget = 35, max_tokens = 900 }\n')
    s = bp.stages["s"]
    assert s.mode == "autonomous" and s.max_iterations is None and s.allow_complete is False
    assert s.available_tools == ["read_file"] and s.system_prompt == "trimmed"
    notes = bp.context.regions["notes"]
    assert notes.budget is None and not notes.is_percentage and notes.effective_max_tokens == 900


def test_negative_counts_wrap_like_an_unchecked_cast() -> None:
    bp = load(MINIMAL + '[stages.s]\nmax_revisits = -1\n')
    assert bp.stages["s"].max_revisits == 2**64 - 1


def test_model_spec_fallbacks_and_legacy_shapes() -> None:
    bp = load(MINIMAL + '[stages.a.model]\nprovider = "openai"\nmodel = "gpt-5.5"\nfallbacks = [{ provider = "google" }]\n'
              'parameters = { temperature = 0.1 }\nrequest_timeout_secs = -5\n'
              '[stages.b.model]\nmodels = [{ model = "claude-opus-5" }, 7]\nprovider = "ignored"\n'
              '[stages.c]\nmodel = "anthropic/claude-opus-5"\n')
    a, b, c = (bp.stages[n].model for n in "abc")
    assert [m.spec for m in a.models] == ["openai/gpt-5.5", "google/claude-sonnet-4-6"]
    assert a.parameters == {"temperature": 0.1} and a.request_timeout_secs is None
    assert [m.spec for m in b.models] == ["anthropic/claude-opus-5"] and b.provider == "ignored"
    assert [m.spec for m in c.models] == ["anthropic/claude-sonnet-4-6"]


def test_strict_tables_reject_unknown_keys_and_lenient_ones_keep_them() -> None:
    bp = load('custom_top = 1\n' + MINIMAL + 'mascot = "eel"\n[stages.s.model]\nmodels = []\nsystem_prompt = "lost"\n'
              '[context.regions]\nnotes = { kind = "pinned", max_tokens = 100, colour = "blue" }\n')
    assert bp.extra == {"custom_top": 1} and bp.agent.extra == {"mascot": "eel"}
    assert bp.stages["s"].model.extra == {"system_prompt": "lost"}
    assert bp.context.regions["notes"].extra == {"colour": "blue"}
    with pytest.raises(BlueprintError) as info:
        load(MINIMAL + '[stages.s]\nmode = "autonomous"\n\n[stages.s.transitions.t]\ngate = { reqiure_regions = ["x"] }\n')
    assert info.value.key_path == "stages.s.transitions.t.gate.reqiure_regions"
    assert info.value.hint == "did you mean 'require_regions'?" and (info.value.line, info.value.column) == (7, 10)


def test_edges_conditions_and_non_table_edges() -> None:
    bp = load(MINIMAL + '[stages.a.transitions]\nb = "true"\nc = { condition = "stuck", stuck_after_minutes = 5, '
              'stuck_after_iterations = 0 }\nd = { transform = "summarize", hint = "h" }\n[stages.b]\n[stages.c]\n[stages.d]\n')
    edges = bp.stages["a"].transitions
    assert edges["b"] == Edge(target="b") and edges["b"].is_normal
    assert edges["c"].stuck_thresholds == {"stuck_after_minutes": 5} and not edges["c"].is_normal
    assert edges["d"].transform == "summarize" and edges["d"].transform_kind == "compact"
    assert [e.target for e in bp.stages["a"].normal_edges] == ["b", "d"]


def test_absent_and_empty_transitions_differ() -> None:
    bp = load(MINIMAL + '[stages.a]\n[stages.b.transitions]\n[stages.c]\n[stages.d.transitions.a]\ncondition = "error"\n')
    assert bp.stages["a"].transitions is None and not bp.stages["a"].has_transitions
    assert bp.stages["b"].transitions == {} and bp.stages["b"].is_explicit_terminal
    assert bp.next_stage("a") == "b" and bp.next_stage("d") is None
    assert bp.terminal_stages == ["b", "d"]


def test_region_kinds_budgets_and_resolution() -> None:
    bp = load(MINIMAL + '[context.regions]\n'
              'a = { kind = "hash_map", budget = " 12.5% " }\n'
              'b = { kind = "sliding_window", budget = "50%", max_tokens = 1000, min_tokens = 10 }\n'
              'c = { kind = "custom", script = "context_hooks/view.rhai", persistent = true }\n'
              'd = { budget = "0.001%", min_tokens = 500 }\n')
    r = bp.context.regions
    assert r["a"].kind == "hashmap" and r["a"].budget_fraction == 0.125 and r["a"].is_fixed
    assert r["a"].resolve_budget(1_000_000) == 125000 and r["b"].resolve_budget(1_000_000) == 1000
    assert r["c"].is_fixed and not r["c"].is_stage_specific and r["d"].kind == "temporary"
    assert r["d"].resolve_budget(1000) == 500


@pytest.mark.parametrize(("seed", "expected"), [
    ('"task_input"', ("caller", "task")),
    ('"input"', ("caller", "notes")),
    ('"criteria"', ("caller", "criteria")),
    ('{ caller = "x" }', ("caller", "x")),
    ('{ glob = "*.md", files = ["a"] }', ("glob", "*.md")),
    ('{ files = ["a", 1] }', ("files", ["a"])),
    ('{ literal = "hello" }', ("literal", "hello")),
    ('{ command = "git ls-files" }', ("command", "git ls-files")),
    ('{ tool = "current_time", refresh = "STAGE" }', ("tools", ["current_time"])),
    ('{ tools = ["a", { name = "b", args = { n = 1 } }] }', ("tools", ["a", "b"])),
])
def test_seed_forms(seed: str, expected: tuple) -> None:
    region = load(MINIMAL + f'[context.regions.notes]\nkind = "pinned"\nseed = {seed}\n').context.regions["notes"]
    kind, value = expected
    assert region.seed is not None and region.seed.kind == kind
    got = {"caller": region.seed.key, "files": region.seed.files,
           "tools": [t.name for t in region.seed.tools]}.get(kind, region.seed.value)
    assert got == value
    if "STAGE" in seed:
        assert region.seed.refresh == "each_stage"


@pytest.mark.parametrize("seed", ['{ tools = [] }', '{ unknown = 1 }', "42", '{ tools = [3] }', '{ glob = 3 }'])
def test_unrecognized_seeds_are_dropped(seed: str) -> None:
    assert load(MINIMAL + f'[context.regions.notes]\nseed = {seed}\n').context.regions["notes"].seed is None


def test_task_region_gets_an_implicit_caller_seed() -> None:
    bp = load(MINIMAL + '[context.regions]\ntask = { kind = "pinned" }\nother = { kind = "pinned", seed = "topic" }\n')
    assert bp.accepts_task and [(i.key, i.region) for i in bp.inputs] == [("task", "task"), ("topic", "other")]


def test_layout_for_and_visibility() -> None:
    bp = load(MINIMAL + '[stages.a]\n[stages.b.context.regions]\nscratch = { kind = "clearable", max_tokens = 100 }\n'
              '[context.regions]\nnotes = { kind = "pinned", max_tokens = 100 }\n')
    assert list(bp.layout_for("a")) == ["notes"] and list(bp.layout_for(bp.stages["b"])) == ["scratch"]
    assert "notes" not in bp.visible_regions("b") and "tool_results" in bp.visible_regions("b")
    assert bp.known_regions >= {"notes", "scratch", "conversation", "final_output"}


def test_blueprint_is_frozen() -> None:
    bp = load(MINIMAL)
    with pytest.raises(Exception):
        bp.agent = None  # type: ignore[misc]
    with pytest.raises(Exception):
        bp.stages["main"].mode = "output"  # type: ignore[misc]


def test_load_accepts_folder_file_and_text(tmp_path: Path) -> None:
    (tmp_path / "agent.leviath").write_text(MINIMAL)
    by_dir, by_file = load(tmp_path), load(tmp_path / "agent.leviath")
    assert by_dir == by_file == load(MINIMAL) == load_text(MINIMAL)
    assert by_dir.base_dir == tmp_path.resolve() and by_dir.source_path.name == "agent.leviath"


def test_default_layout_is_the_documented_one() -> None:
    layout = default_layout()
    assert layout["system"] == Region(name="system", kind="pinned", max_tokens=8000, volatility="stable")
    assert layout["conversation"].kind == "sliding_window" and layout["conversation"].max_items == 10


# ------------------------------------------------------------------------------------------------
# Round trips and the schema
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("folder", LOADABLE, ids=[f"{p.parent.name}/{p.name}" for p in LOADABLE])
def test_round_trip_gives_an_equal_model(folder: Path) -> None:
    bp = load(folder)
    text = bp.to_toml()
    again = load_text(text)
    assert again == bp
    assert again.to_toml() == text


def test_round_trip_keeps_stage_order_in_equality() -> None:
    a = load(MINIMAL + "[stages.x]\n[stages.y]\n")
    b = load(MINIMAL + "[stages.y]\n[stages.x]\n")
    assert a != b


# invalid/: blueprints the loader refuses; wrong-type: values the loader reads as absent, which the
# JSON Schema refuses too (that fixture exists to show the lint that says so).
WELL_FORMED = [p for p in LOADABLE if p.parent.name != "invalid" and p.name != "wrong-type"]


@pytest.mark.parametrize("folder", WELL_FORMED, ids=[f"{p.parent.name}/{p.name}" for p in WELL_FORMED])
def test_fixture_toml_matches_the_json_schema(folder: Path) -> None:
    raw = tomllib.loads((folder / "agent.leviath").read_text())
    errors = [e.message for e in _SCHEMA_VALIDATOR.iter_errors(raw)]
    assert errors == []


_SCHEMA_VALIDATOR = jsonschema.Draft202012Validator(json_schema())


def test_schema_rejects_what_the_loader_rejects() -> None:
    bad = {"agent": {}, "stages": {"s": {"mode": "fan_out_merge", "tols": []}}}
    messages = " ".join(e.message for e in _SCHEMA_VALIDATOR.iter_errors(bad))
    assert "fan_out_merge" in messages and "tols" in messages


def test_model_classes_are_exported() -> None:
    assert Stage.model_config["extra"] == "forbid" and Blueprint.model_config["frozen"] is True


def test_fast_construct_matches_validated_construction() -> None:
    from lev_nb.blueprint.model import OutputSpec, construct

    built = construct(Region, name="r", kind="pinned", colour="blue")
    checked = Region(name="r", kind="pinned", colour="blue")
    assert built == checked and built.model_fields_set == checked.model_fields_set
    assert built.model_dump(exclude_unset=True) == checked.model_dump(exclude_unset=True)
    spec = construct(OutputSpec, schema={"type": "object"})
    assert spec.json_schema == {"type": "object"} and spec.model_dump(by_alias=True, exclude_unset=True) == {
        "schema": {"type": "object"}}


# -- budget resolution (the one used by the engine's planner) ----------------------------------------
@pytest.mark.parametrize(
    ("budget", "max_tokens", "min_tokens", "window", "expected"),
    [
        (None, 1234, None, 200_000, 1234),      # absolute budget
        (None, None, None, 200_000, 5000),      # default
        ("25%", None, None, 200_000, 50_000),   # share of the window
        ("12.5%", None, None, 200_000, 25_000),
        ("25%", None, None, 10, 3),             # 2.5 rounds away from zero (not to even)
        ("15%", None, None, 10, 2),             # 1.5 -> 2
        ("50%", 1000, None, 10_000, 1000),      # capped by max_tokens
        ("1%", None, 700, 10_000, 700),         # raised to min_tokens
        ("50%", 100, 300, 10_000, 300),         # the floor is applied after the cap
    ],
)
def test_region_budget_resolution(budget, max_tokens, min_tokens, window, expected) -> None:
    from lev_nb.blueprint import Region

    region = Region(name="r", budget=budget, max_tokens=max_tokens, min_tokens=min_tokens)
    assert region.resolve_budget(window) == expected
