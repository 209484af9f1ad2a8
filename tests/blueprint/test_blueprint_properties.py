"""Property tests: any TOML shaped roughly like a blueprint loads or raises BlueprintError, nothing else."""

from __future__ import annotations

import pytest
import tomli_w
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from lev_nb.blueprint import BlueprintError, load_text
from lev_nb.scripting.checks import validate
from lev_nb.blueprint import constants as C

NAMES = st.sampled_from(["a", "b", "plan", "review", "summary", "conversation", "task", "notes", ""])
SCALARS = st.one_of(
    st.booleans(), st.integers(min_value=-(2**63), max_value=2**63 - 1), st.text(max_size=12),
    st.floats(allow_nan=False), NAMES,
    st.sampled_from(C.MODES + C.CONDITIONS + C.TRANSFORMS + C.REGION_KINDS + C.POLICIES + ("10%", "150%", "x%", "fan_out_merge")),
)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.one_of(NAMES, st.text(max_size=6)), inner, max_size=3)),
    max_leaves=8)


def _table(keys: tuple[str, ...], value_for: dict[str, st.SearchStrategy] | None = None) -> st.SearchStrategy:
    value_for = value_for or {}
    key = st.one_of(st.sampled_from(keys), st.sampled_from(keys), st.text(max_size=8))
    return st.dictionaries(key, VALUES, max_size=5).flatmap(
        lambda d: st.fixed_dictionaries({k: value_for.get(k, st.just(v)) for k, v in d.items()}))


GATE = _table(C.GATE_KEYS)
EDGE = _table(C.EDGE_KEYS, {"gate": GATE, "condition": st.sampled_from(C.CONDITIONS),
                            "transform": st.sampled_from(C.TRANSFORMS)})
REGION_KEYS = ("kind", "budget", "max_tokens", "min_tokens", "required", "seed", "strategy", "script",
               "admission", "volatility", "summarizable", "persistent", "compact_at")
REGION = _table(REGION_KEYS, {"kind": st.sampled_from(C.REGION_KINDS),
                              "budget": st.sampled_from(["10%", "50%", " 2.5% ", "abc", "0%"]),
                              "seed": st.one_of(VALUES, st.sampled_from(["task_input", "input"]),
                                                st.fixed_dictionaries({"command": st.text(max_size=20)}))})
REGIONS = st.dictionaries(NAMES, REGION, max_size=4)
STAGE = _table(C.STAGE_KEYS, {
    "mode": st.sampled_from(C.MODES),
    "transitions": st.one_of(st.dictionaries(NAMES, st.one_of(EDGE, VALUES), max_size=3), VALUES),
    "context": st.fixed_dictionaries({"regions": REGIONS}),
    "tool_routing": _table(C.TOOL_ROUTING_KEYS),
    "hooks": _table(C.HOOK_KEYS),
    "interaction_points": st.lists(_table(("name", "unattended", "style", "options")), max_size=2),
    "available_tools": st.lists(st.sampled_from(C.BUILTIN_TOOLS + ("bash", "nope")), max_size=4),
})
BLUEPRINT = st.fixed_dictionaries(
    {"agent": _table(("name", "version", "entry_stage", "nudge", "output"))},
    optional={
        "stages": st.dictionaries(NAMES, STAGE, max_size=4),
        "context": st.fixed_dictionaries({"regions": REGIONS}),
        "sandbox": _table(("kind", "on_unavailable", "mount", "network")),
        "read_paths": _table(("allow",)),
        "safe_commands": _table(("tools", "shell")),
        "tool_permissions": st.dictionaries(st.sampled_from(C.BUILTIN_TOOLS), st.one_of(VALUES, st.sampled_from(C.POLICIES))),
        "transforms": st.lists(_table(("from_blueprint", "to_blueprint", "mappings")), max_size=2),
        "model": VALUES,
    },
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(BLUEPRINT)
def test_random_blueprints_load_or_raise_blueprint_error(data: dict) -> None:
    text = tomli_w.dumps(data)
    try:
        bp = load_text(text)
    except BlueprintError as exc:
        assert exc.kind == "parse" and exc.message
        event("refused at load")
        return
    report = validate(bp)
    event("refused by the checks" if report.error else "linted")
    assert report.errors >= 0 and isinstance(report.to_json(), str)
    assert load_text(bp.to_toml()) == bp


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_arbitrary_text_never_escapes_as_another_exception(text: str) -> None:
    try:
        load_text('[agent]\nname = "x"\n' + text)
    except BlueprintError:
        pass
