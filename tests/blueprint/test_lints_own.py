"""lev_nb's own checks for what cannot work (lev_nb.blueprint.lints_own), as ``lev validate`` tells
them: where inside a schema it is broken, and a permission the configuration caps."""

from __future__ import annotations

import json
from pathlib import Path

from support import FIXTURES, Lev

from lev_nb.blueprint.constants import ASK_BY_DEFAULT, BUILTIN_TOOLS
from lev_nb.schemas import schema_problem
from lev_nb.tools.builtin import default_registry

LINTS = FIXTURES / "lints"


def test_the_tools_that_ask_by_default_are_the_registrys() -> None:
    registry = default_registry()
    asking = {name for name in BUILTIN_TOOLS if (tool := registry.get(name)) is not None and tool.default_policy == "ask"}
    assert asking == set(ASK_BY_DEFAULT)


def test_a_broken_schema_says_where_inside_it() -> None:
    assert schema_problem({"type": "object", "properties": {"n": {"type": "strng"}}}) == (
        'at properties.n.type: type = "strng" is not a JSON Schema type '
        "(one of array, boolean, integer, null, number, object, string)")
    assert schema_problem({"type": "object", "required": "n"}).startswith("at required: ")
    assert schema_problem({"type": "object"}) is None
    assert schema_problem(["not", "a", "schema"]) == "a schema is a table (an object), not list"


def test_validate_refuses_what_cannot_work(lev: Lev) -> None:
    for code, phrase in [
        ("gate-unknown-region", "gate.require_regions names region 'plna', which no stage declares"),
        ("output-schema-invalid", 'stages.report.output.schema is not a valid JSON Schema: at properties.n.type: '
                                  'type = "strng"'),
        ("output-format-key-typo", "[stages.report.output] has the key 'fromat', a misspelling of 'format'"),
    ]:
        out = lev("validate", str(LINTS / code), "--json")
        assert out.returncode == 1, out.stderr
        [finding] = [f for f in json.loads(out.stdout)["findings"] if f["code"] == code]
        assert finding["severity"] == "error" and phrase in finding["message"]


def test_a_permission_the_configuration_caps_gets_a_note(lev: Lev, home: Path) -> None:
    out = lev("validate", str(LINTS / "permission-capped"))
    assert out.returncode == 0, out.stderr
    notes = [line for line in out.stdout.splitlines() if line.endswith("[permission-capped]")]
    assert notes == [
        '  NOTE [tool_permissions] write_file = "allow" is held to "ask" by your configuration, so a run asks '
        "before running write_file (and denies it where nobody can be asked) [permission-capped]",
        "  NOTE stage 'work': [stages.work.tool_permissions] shell = \"allow\" is held to \"ask\" by your "
        "configuration, so a run asks before running shell (and denies it where nobody can be asked) [permission-capped]",
    ]
    # A configuration that lets write_file run, or lets blueprints set their own permissions, has no note.
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[tool_permissions]\nwrite_file = "allow"\n', encoding="utf-8")
    assert lev("validate", str(LINTS / "permission-capped")).stdout.count("[permission-capped]") == 1
    (home / "config.toml").write_text("[security]\nallow_blueprint_permissions = true\n", encoding="utf-8")
    assert "[permission-capped]" not in lev("validate", str(LINTS / "permission-capped")).stdout


def test_a_value_of_the_wrong_type_is_named_with_its_line_and_the_type_it_takes(lev: Lev) -> None:
    out = lev("validate", str(LINTS / "wrong-type"), "--json")
    assert out.returncode == 0, out.stderr  # a warning: the blueprint loads, as the upstream's does
    found = {(f["stage"], f["message"]): f["fix"] for f in json.loads(out.stdout)["findings"] if f["code"] == "wrong-type"}
    assert found == {
        (None, "context.regions.system.max_tokens (line 14) is a string, but it takes a whole number, so the value "
               "is ignored and the key reads as not set"): "write max_tokens as a whole number, or remove it",
        ("work", "stages.work.max_iterations (line 20) is a string, but it takes a whole number, so the value is "
                 "ignored and the key reads as not set"): "write max_iterations as a whole number, or remove it",
        ("work", "stages.work.available_tools (line 21) has an item that is not a string, which the format drops"):
            "write each item as a quoted string",
        ("work", "stages.work.allow_complete (line 22) is a string, but it takes true or false, so the value is "
                 "ignored and the key reads as not set"): "write allow_complete as true or false, or remove it",
        ("report", "stages.report.model.models[0].model (line 29) is a whole number, but it takes a string, so the "
                   "value is ignored and the key reads as not set"): "write model as a string, or remove it",
    }
    assert lev("validate", str(LINTS / "wrong-type"), "--deny-warnings").returncode == 1


def test_no_blueprint_written_right_is_told_it_has_a_wrong_type() -> None:
    """Short forms the format reads into a table (a region's ``seed = "task_input"``) and every
    bundled, example and fixture blueprint that loads give no ``wrong-type`` finding."""
    from lev_nb.blueprint import BlueprintError, load
    from lev_nb.blueprint.lints_own import wrong_type

    root = Path(__file__).resolve().parents[2]
    checked = 0
    for path in sorted(root.glob("**/*.leviath")):
        if ".venv" in path.parts or path.parent.name == "wrong-type":
            continue
        try:
            bp = load(path)
        except BlueprintError:
            continue
        checked += 1
        assert wrong_type(bp) == [], path
    assert checked > 50
