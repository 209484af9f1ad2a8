"""Where a finding points in the text (lev_nb.blueprint.finding_lines): the key it names, a key of
its stage, a quoted name on one of the stage's lines, a [table], else the stage's header."""

from __future__ import annotations

from lev_nb.blueprint import load_text
from lev_nb.blueprint.finding_lines import finding_line
from lev_nb.blueprint.report import Finding
from lev_nb.scripting.checks import validate

TEXT = '''\
[agent]
name = "lines"
entry_stage = "a"

[safe_commands]
shell = ["ls -la | wc"]

[stages.a]
mode = "autonomous"
available_tools = ["read_file",
  "reed_file"]
allow_complete = true

[stages.a.transitions.b]
hint = "go"

[stages.b]
mode = "output"

[stages.b.output]
format = "mardown"

[stages.b.transitions]
'''


def lines_by_code() -> dict[str, list[int | None]]:
    bp = load_text(TEXT)
    found: dict[str, list[int | None]] = {}
    for f in validate(bp).findings:
        found.setdefault(f.code, []).append(finding_line(f, TEXT, bp.raw))
    return found


def test_each_finding_points_at_its_line() -> None:
    found = lines_by_code()
    assert found["unknown-tool"] == [11]  # the quoted name, on the second line of the array
    assert found["output-format-typo"] == [21]  # the dotted key the message writes
    assert found["allow-complete-skips-output"] == [12]  # the key the fix names, written in the stage
    assert found["stage-missing-max-iterations"] == [8, 17]  # not written: the stage's header
    assert found["unparseable-safe-command"] == [5]  # the [table] the message names


def test_a_finding_about_the_whole_blueprint_has_no_line() -> None:
    finding = Finding(code="x", severity="note", message="nothing to point at")
    assert finding_line(finding, TEXT) is None
