"""``dynamic_tools = true`` (issue 24): a script tool the agent writes into its workdir's tools/
mid-run becomes callable on the next inference once it compiles; off, it never does."""

from __future__ import annotations

from pathlib import Path

from support import call, events_of, say

SHOUT = '// @tool shout\n// @description Upper-case text\n// @param words string required "input"\nparams.words.to_upper()\n'
AGENT = """
[agent]
name = "grower"
dynamic_tools = {dynamic}
[tool_permissions]
write_file = "allow"
[stages.work]
available_tools = ["write_file"]
nudge = {{ enabled = false }}
[stages.work.transitions]
"""


def _run(engine, dynamic: bool, script: str):
    turns = [call("write_file", path="tools/shout.rhai", content=script), call("shout", words="hi"), say("ok")]
    return engine.run(AGENT.format(dynamic=str(dynamic).lower()), turns)


def test_a_tool_the_agent_writes_becomes_callable(engine, blueprint_permissions: Path) -> None:
    run, model = _run(engine, True, SHOUT)
    assert run.status == "complete", run.error
    assert [t.name for t in model.requests[0].tools] == ["write_file"]
    assert [t.name for t in model.requests[1].tools] == ["write_file", "shout"]
    results = [e.summary for e in events_of(run, "tool_finished")]
    assert results[1] == "HI"


def test_a_script_that_does_not_compile_is_not_offered(engine, blueprint_permissions: Path) -> None:
    run, model = _run(engine, True, "// @tool shout\nlet = ;\n")
    assert [t.name for t in model.requests[1].tools] == ["write_file"]
    assert [e.summary for e in events_of(run, "tool_finished")][1].startswith("[unavailable]")
    assert any("shout.rhai is not offered" in e.message for e in events_of(run, "warning"))


def test_off_by_default(engine, blueprint_permissions: Path) -> None:
    run, model = _run(engine, False, SHOUT)
    assert [t.name for t in model.requests[1].tools] == ["write_file"]
    assert [e.summary for e in events_of(run, "tool_finished")][1].startswith("[unavailable]")


def test_a_script_linked_from_outside_is_not_offered(engine, workdir: Path, blueprint_permissions: Path) -> None:
    outside = workdir.parent / "elsewhere.rhai"
    outside.write_text(SHOUT)
    (workdir / "tools").mkdir()
    (workdir / "tools" / "shout.rhai").symlink_to(outside)
    run, model = engine.run(AGENT.format(dynamic="true"), [call("shout", words="hi"), say("ok")])
    assert [t.name for t in model.requests[0].tools] == ["write_file"]
    assert any("outside the working directory" in e.message for e in events_of(run, "warning"))
