"""The global tools folder, ``lev tools`` and ``[tool_script_permissions]`` (issue 24)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import call, events_of, say

UPPER = '// @tool upper\n// @description Upper-case text\n// @param value string required "input"\nparams.value.to_upper()\n'
MINE = '// @tool upper\n// @description Mine\n// @param value string required "input"\n"agent: " + params.value\n'
STAGE = '[stages.work]\navailable_tools = ["upper"]\nnudge = { enabled = false }\n[stages.work.transitions]\n'


def _global(home: Path, name: str, text: str) -> None:
    (home / "tools").mkdir(parents=True, exist_ok=True)
    (home / "tools" / name).write_text(text)


def _results(run) -> list[str]:
    return [e.summary for e in events_of(run, "tool_finished")]


def test_a_global_tool_is_offered_to_an_agent_that_lists_it(engine, home: Path) -> None:
    _global(home, "upper.rhai", UPPER)
    run, model = engine.run(STAGE, [call("upper", value="shout"), say("ok")])
    assert run.status == "complete", run.error
    assert _results(run) == ["SHOUT"]
    assert [t.name for t in model.requests[0].tools] == ["upper"]


def test_an_agents_own_tool_shadows_the_global_one(engine, home: Path, tmp_path: Path) -> None:
    import lev_nb

    _global(home, "upper.rhai", UPPER)
    agent = tmp_path / "agent"
    (agent / "tools").mkdir(parents=True)
    (agent / "tools" / "upper.rhai").write_text(MINE)
    (agent / "agent.leviath").write_text('[agent]\nname = "mine"\n' + STAGE)
    run, _ = engine.run(lev_nb.load(agent), [call("upper", value="x"), say("ok")])
    assert _results(run) == ["agent: x"]


def test_lev_tools_lists_the_inventory(lev, home: Path) -> None:
    assert "no global tools" in lev("tools").stdout
    _global(home, "upper.rhai", UPPER)
    _global(home, "broken.rhai", "// @tool broken\nlet = ;\n")
    _global(home, "shell.rhai", "// @tool shell\n1\n")
    text = lev("tools").stdout
    assert "upper(value): Upper-case text" in text
    assert "skipped" in text and "broken.rhai" in text and "shell.rhai" in text
    data = json.loads(lev("tools", "--json").stdout)
    (tool,) = data["tools"]
    assert tool["name"] == "upper" and tool["parameters"]["required"] == ["value"]
    assert {Path(s["path"]).name for s in data["skipped"]} == {"broken.rhai", "shell.rhai"}


SCRIPTS = {
    "run_shell.rhai": '// @tool run_shell\n// @requires shell\nshell("echo hi")\n',
    "save.rhai": '// @tool save\n// @requires filesystem\nwrite_file("saved.txt", "x")\n',
    "home_var.rhai": '// @tool home_var\nenv_var("HOME")\n',
}
SCRIPT_STAGE = ('[stages.work]\navailable_tools = ["run_shell", "save", "home_var"]\nnudge = { enabled = false }\n'
                "[stages.work.transitions]\n")
TURNS = [call("run_shell"), call("save"), call("home_var"), say("ok")]


@pytest.fixture
def script_tools(home: Path) -> None:
    for name, text in SCRIPTS.items():
        _global(home, name, text)


@pytest.mark.usefixtures("script_tools")
def test_inherit_follows_the_builtin_policies(engine, home: Path, workdir: Path) -> None:
    # The tools themselves are allowed; inside, shell inherits the built-in's "ask".
    run, _ = engine.run(SCRIPT_STAGE, TURNS, allow=["run_shell", "save", "home_var"])
    shell, save, home_var = _results(run)
    assert "script host function 'shell' is not permitted" in shell
    assert (workdir / "saved.txt").read_text() == "x"  # write_file: inherit permits it, in the workdir
    assert home_var and "denied" not in home_var  # env_var: inherit permits it
    run, _ = engine.run(SCRIPT_STAGE, TURNS, allow=["run_shell", "save", "home_var", "shell"])
    shell, _, _ = _results(run)
    assert shell.startswith("hi")


@pytest.mark.usefixtures("script_tools")
def test_config_allows_or_denies_a_host_function(engine, home: Path, workdir: Path) -> None:
    (home / "config.toml").write_text('[tool_script_permissions]\nshell = "allow"\nenv_var = "deny"\nwrite_file = "deny"\n')
    run, _ = engine.run(SCRIPT_STAGE, TURNS, allow=["run_shell", "save", "home_var"])
    shell, save, home_var = _results(run)
    assert shell.startswith("hi")
    assert "not permitted" in save
    assert 'env_var = "deny"' in home_var


def test_validate_knows_the_global_tools(lev, home: Path, tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "agent.leviath").write_text('[agent]\nname = "user"\n' + STAGE)

    def unknown() -> list[dict]:
        findings = json.loads(lev("validate", "--json", str(agent)).stdout)["findings"]
        return [f for f in findings if f["code"] == "unknown-tool"]

    assert unknown()
    _global(home, "upper.rhai", UPPER)
    assert not unknown()


def test_a_tool_file_is_compiled_once_while_it_is_unchanged(home: Path) -> None:
    """Every run looks at the global tools folder: an unchanged file's parse is reused, an edited
    one (or one whose sibling .toml appears) is read again, and a broken one is never kept."""
    from lev_nb.scripting import discover_tools

    folder = home / "tools"
    _global(home, "upper.rhai", UPPER)
    first, _ = discover_tools([folder])
    again, _ = discover_tools([folder])
    assert again["upper"] is first["upper"]

    (folder / "upper.rhai").write_text(UPPER.replace("Upper-case text", "Capitals, longer"))
    edited, _ = discover_tools([folder])
    assert edited["upper"].description == "Capitals, longer"

    (folder / "upper.toml").write_text('[tool]\nname = "upper"\ndescription = "From the manifest"\n')
    described, skipped = discover_tools([folder])
    assert skipped == [] and described["upper"].description == "From the manifest"

    (folder / "upper.toml").unlink()
    (folder / "upper.rhai").write_text("// @tool upper\nlet = ;\n")
    _, skipped = discover_tools([folder])
    assert [s.path.name for s in skipped] == ["upper.rhai"]
    (folder / "upper.rhai").write_text(UPPER)
    fixed, skipped = discover_tools([folder])
    assert skipped == [] and fixed["upper"].description == "Upper-case text"


def test_a_listed_global_tool_that_does_not_load_is_told_not_left_silent(engine, home: Path) -> None:
    """A broken file in the global tools folder: the person is told why the stage lacks the tool,
    and the model is not told it may call the tool it was just refused."""
    _global(home, "upper.rhai", "// @tool upper\n// @description Upper-case text\nlet = ;\n")
    run, model = engine.run(STAGE.replace('["upper"]', '["upper", "read_file"]'),
                            [call("upper", value="shout"), say("ok")])
    assert run.status == "complete", run.error
    (warning,) = [w for w in run.warnings if w.code == "tool-unavailable"]
    assert "'upper' is not offered in stage 'work'" in warning.message
    assert "upper.rhai" in warning.message and "line 3" in warning.message
    assert _results(run) == ["[unavailable] 'upper' is not available in this stage. You may call: read_file."]
    assert [t.name for t in model.requests[0].tools] == ["read_file"]


def test_an_agents_own_tool_that_does_not_load_is_told_too(engine, home: Path, tmp_path: Path) -> None:
    import lev_nb

    agent = tmp_path / "agent"
    (agent / "tools").mkdir(parents=True)
    (agent / "tools" / "upper.rhai").write_text("// @tool upper\n// @description Mine\nlet = ;\n")
    (agent / "agent.leviath").write_text('[agent]\nname = "mine"\n' + STAGE)
    run, _ = engine.run(lev_nb.load(agent), [say("ok")])
    (warning,) = [w for w in run.warnings if w.code == "tool-unavailable"]
    assert warning.message.startswith("'upper' is not offered in stage 'work': the agent's tool did not load")
