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
