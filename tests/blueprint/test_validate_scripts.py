"""`lev validate` compiles every Rhai script a blueprint names or discovers (beyond the upstream)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import Lev

from lev_nb.scripting.checks import validate


BASE = """
[agent]
name = "scripts"
[stages.work]
mode = "autonomous"
model = {{ provider = "anthropic", model = "claude-sonnet-4-6" }}
max_iterations = 3
available_tools = {tools}
{extra}
[stages.work.transitions]
"""


def agent(tmp_path: Path, files: dict[str, str], tools: str = "[]", extra: str = "") -> Path:
    folder = tmp_path / "agent"
    folder.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (folder / "agent.leviath").write_text(BASE.format(tools=tools, extra=extra), encoding="utf-8")
    return folder


def script_errors(folder: Path) -> list:
    return [f for f in validate(folder).findings if f.code == "script-error"]


def test_clean_scripts_give_no_findings(tmp_path: Path) -> None:
    folder = agent(tmp_path, {
        "tools/echo.rhai": "// @tool echo\n// @param text string required\nparams.text",
        "validators/v.rhai": "fn validate(c) { () }",
    }, tools='["echo"]', extra='[stages.work.output]\nvalidator = "validators/v.rhai"\n')
    report = validate(folder)
    assert not [f for f in report.findings if f.code.startswith("script-")]


def test_tool_syntax_error_is_an_error_naming_file_and_line(tmp_path: Path) -> None:
    folder = agent(tmp_path, {"tools/broken.rhai": "// @tool broken\nlet x = ;\n"})
    [finding] = script_errors(folder)
    assert finding.severity == "error" and finding.stage is None
    assert "tools/broken.rhai" in finding.message and "line 2" in finding.message
    assert validate(folder).valid is False


def test_tool_without_tool_annotation_is_an_error(tmp_path: Path) -> None:
    folder = agent(tmp_path, {"tools/anon.rhai": "40 + 2"})
    [finding] = script_errors(folder)
    assert "@tool" in finding.message


def test_tool_shadowing_a_builtin_is_a_warning(tmp_path: Path) -> None:
    folder = agent(tmp_path, {"tools/rf.rhai": "// @tool read_file\n\"x\""})
    findings = [f for f in validate(folder).findings if f.code == "script-tool-skipped"]
    assert len(findings) == 1 and findings[0].severity == "warning"
    assert "read_file" in findings[0].message


def test_validator_without_entry_point(tmp_path: Path) -> None:
    folder = agent(tmp_path, {"validators/v.rhai": "fn other(x) { () }"},
                   extra='[stages.work.output]\nvalidator = "validators/v.rhai"\n')
    [finding] = script_errors(folder)
    assert finding.stage == "work" and "fn validate" in finding.message


def test_validator_with_wrong_arity(tmp_path: Path) -> None:
    folder = agent(tmp_path, {"validators/v.rhai": "fn validate(a, b) { () }"},
                   extra='[stages.work.output]\nvalidator = "validators/v.rhai"\n')
    [finding] = script_errors(folder)
    assert "exactly one parameter" in finding.message


def test_validator_outside_the_agent_folder_or_missing(tmp_path: Path) -> None:
    (tmp_path / "outside.rhai").write_text("fn validate(c) { () }", encoding="utf-8")
    folder = agent(tmp_path, {}, extra='[stages.work.output]\nvalidator = "../outside.rhai"\n')
    [finding] = script_errors(folder)
    assert "outside the agent folder" in finding.message
    folder2 = agent(tmp_path / "b", {}, extra='[stages.work.output]\nvalidator = "validators/none.rhai"\n')
    [missing] = script_errors(folder2)
    assert "does not exist" in missing.message


def test_validator_eval_is_refused_at_validate_time(tmp_path: Path) -> None:
    folder = agent(tmp_path, {"validators/v.rhai": 'fn validate(c) { eval("1") }'},
                   extra='[stages.work.output]\nvalidator = "validators/v.rhai"\n')
    [finding] = script_errors(folder)
    assert "eval" in finding.message


def test_hook_file_missing_the_named_hook(tmp_path: Path) -> None:
    folder = agent(tmp_path, {"hooks/h.rhai": "fn on_stage_exit(ctx) { () }"},
                   extra='[stages.work.hooks]\non_stage_enter = "hooks/h.rhai"\n')
    [finding] = script_errors(folder)
    assert finding.stage == "work" and "on_stage_enter" in finding.message


def test_hook_with_wrong_arity(tmp_path: Path) -> None:
    folder = agent(tmp_path, {"hooks/h.rhai": "fn on_stage_enter(a, b) { () }"},
                   extra='[stages.work.hooks]\non_stage_enter = "hooks/h.rhai"\n')
    [finding] = script_errors(folder)
    assert "found 2" in finding.message


def test_custom_region_without_render(tmp_path: Path) -> None:
    folder = agent(tmp_path, {"context_hooks/r.rhai": "fn on_write(ctx) { true }"},
                   extra="")
    text = (folder / "agent.leviath").read_text()
    text += '\n[context.regions]\nconversation = { kind = "sliding_window", max_items = 10 }\n' \
            'notes = { kind = "custom", script = "context_hooks/r.rhai" }\n'
    (folder / "agent.leviath").write_text(text)
    [finding] = script_errors(folder)
    assert "notes" in finding.message and "render" in finding.message


def test_every_broken_script_is_reported_not_only_the_first(tmp_path: Path) -> None:
    folder = agent(tmp_path, {
        "tools/a.rhai": "// @tool a\nlet = 1;",
        "tools/b.rhai": "// @tool b\nfn (",
        "validators/v.rhai": "fn validate() { () }",
    }, extra='[stages.work.output]\nvalidator = "validators/v.rhai"\n')
    assert len(script_errors(folder)) == 3


def test_cli_json_lists_script_errors_and_exits_1(tmp_path: Path, lev: Lev) -> None:
    folder = agent(tmp_path, {"tools/broken.rhai": "// @tool broken\nlet x = ;\n"})
    out = lev("validate", str(folder), "--json")
    assert out.returncode == 1
    data = json.loads(out.stdout)
    assert data["valid"] is False
    assert any(f["code"] == "script-error" for f in data["findings"])


@pytest.mark.parametrize("name", ["code-fixer", "research-brief", "triage"])
def test_bundled_agents_scripts_compile(name: str) -> None:
    root = Path(__file__).resolve().parents[2] / "blueprints" / name
    assert script_errors(root) == []
