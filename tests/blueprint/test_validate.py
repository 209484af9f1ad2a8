"""Hard failures (spec/blueprint.md §9), the validate pipeline (§8) and the ``lev validate`` CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import Lev

import lev_nb
from lev_nb.blueprint import BlueprintError, Finding, extra_checks, load
from lev_nb.scripting.checks import validate

FIXTURES = Path(__file__).parents[1] / "fixtures"
INVALID = sorted(p for p in (FIXTURES / "invalid").iterdir() if (p / "agent.leviath").is_file())


def _expectations(folder: Path) -> dict[str, str]:
    out = {}
    for line in (folder / "agent.leviath").read_text().splitlines():
        if line.startswith("# expect-"):
            key, _, value = line[len("# expect-"):].partition(":")
            out[key] = value.strip()
    return out


@pytest.mark.parametrize("folder", INVALID, ids=[p.name for p in INVALID])
def test_invalid_fixture_is_refused_with_its_error(folder: Path) -> None:
    expect = _expectations(folder)
    report = validate(folder)
    assert report.valid is False
    assert report.findings == [] and report.errors == 1
    prefix = "parse error: " if expect["error"] == "parse" else "validation failed: "
    assert report.error is not None and report.error.startswith(prefix), report.error
    assert expect["message"] in report.error
    exc = report.exception
    assert isinstance(exc, BlueprintError) and exc.kind == expect["error"]
    if "key" in expect:
        assert exc.key_path == expect["key"]
    if "line" in expect:
        assert exc.line == int(expect["line"]), str(exc)
    if "hint" in expect:
        assert exc.hint is not None and expect["hint"] in exc.hint
    assert exc.path is not None and exc.path.name == "agent.leviath"


def test_load_raises_blueprint_error_for_parse_failures_only() -> None:
    with pytest.raises(BlueprintError) as info:
        load(FIXTURES / "invalid" / "p04-unknown-mode")
    err = info.value
    assert isinstance(err, ValueError)
    assert err.key_path == "stages.a.mode" and err.line is not None and err.column == 1
    assert "agent.leviath:" in str(err) and "stages.a.mode" in str(err)
    # A validation failure still loads: the hard checks belong to validate().
    bp = load(FIXTURES / "invalid" / "v14-self-loop")
    assert bp.stages["a"].transitions is not None and "a" in bp.stages["a"].transitions


def test_toml_syntax_error_has_line_and_column() -> None:
    with pytest.raises(BlueprintError) as info:
        load('[agent]\nname = "x"\n[stages.a\n')
    assert info.value.line == 3 and info.value.column is not None
    assert info.value.message.startswith("Failed to parse agent.leviath:")


def test_missing_manifest_raises_read_error(tmp_path: Path) -> None:
    with pytest.raises(BlueprintError) as info:
        validate(tmp_path)
    assert info.value.kind == "read" and "No agent.leviath found at" in info.value.message


def test_only_the_first_failure_is_reported() -> None:
    report = validate(FIXTURES / "invalid" / "p38-order-stage-before-regions")
    assert "unknown key 'tools'" in (report.error or "")
    assert "bogus" not in (report.error or "")


def test_a_stage_key_named_by_its_last_word_gets_the_keys_it_is_part_of() -> None:
    """``tools = [...]`` (as other frameworks spell it) is suggested the stage keys ending in
    ``tools``, not ``hooks``, which is merely spelt alike; a plain typo still gets the spelling."""
    from lev_nb.blueprint.errors import did_you_mean

    with pytest.raises(BlueprintError) as info:
        load('[agent]\nname = "x"\nentry_stage = "a"\n[stages.a]\nmode = "autonomous"\ntools = ["shell"]\n')
    assert "did you mean 'allow_blocking_tools', 'available_tools' or 'required_tools'?" in str(info.value)
    assert did_you_mean("permissions", ["tool_permissions", "tool_routing"]) == "did you mean 'tool_permissions'?"
    assert did_you_mean("hoks", ["hooks", "available_tools"]) == "did you mean 'hooks'?"


def test_custom_region_script_must_stay_inside_the_agent_folder(tmp_path: Path) -> None:
    (tmp_path / "outside.rhai").write_text("fn render(ctx) { \"x\" }")
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "agent.leviath").write_text(
        '[agent]\nname = "c"\n[stages.a]\nmode = "autonomous"\n'
        '[context.regions]\nview = { kind = "custom", script = "../outside.rhai" }\n')
    report = validate(agent)
    assert report.error is not None and "resolves outside" in report.error
    (agent / "agent.leviath").write_text(
        '[agent]\nname = "c"\n[stages.a]\nmode = "autonomous"\n'
        '[context.regions]\nview = { kind = "custom", script = "context_hooks/missing.rhai" }\n')
    report = validate(agent)
    assert report.error is not None and "cannot read custom region script" in report.error


def test_extra_checks_hook_adds_findings() -> None:
    def hook(bp):  # type: ignore[no-untyped-def]
        return [Finding(code="script-compile", severity="error", message="boom", stage="work")]

    extra_checks.append(hook)
    try:
        report = validate(FIXTURES / "lints" / "clean")
    finally:
        extra_checks.remove(hook)
    assert report.codes == ["script-compile"] and not report.valid
    assert validate(FIXTURES / "lints" / "clean").valid


def test_report_json_shape_for_a_valid_blueprint() -> None:
    data = validate(FIXTURES / "lints" / "clean").to_dict()
    assert data == {
        "valid": True,
        "blueprint": {"name": "lint-fixture", "version": "1.0.0", "description": "One lint at a time",
                      "entry_stage": None, "stages": ["work", "report"], "accepts_task": False, "inputs": []},
        "error": None, "findings": [], "errors": 0, "warnings": 0, "notes": 0, "models": None,
    }


def test_deny_warnings_changes_the_verdict_not_the_findings() -> None:
    folder = FIXTURES / "lints" / "stage-missing-mode"
    assert validate(folder).valid is True
    strict = validate(folder, deny_warnings=True)
    assert strict.valid is False and strict.warnings == 1
    assert strict.failure_line() == "Error: ✗ Blueprint has 1 warning (--deny-warnings)"


def test_report_text_and_repr() -> None:
    report = validate(FIXTURES / "lints" / "unknown-tool")
    assert repr(report) == "<Report 'lint-fixture' valid=False errors=1 warnings=0 notes=0>"
    assert "  ERR  stage 'work': grants 'web_serch'" in str(report)
    assert "[unknown-tool]" in str(report) and "<table>" in report._repr_html_()


def test_top_level_lazy_exports() -> None:
    from lev_nb.catalog import load as load_by_name_or_path
    from lev_nb.verdict import validate as validate_here

    assert lev_nb.validate is validate_here and lev_nb.load is load_by_name_or_path
    assert lev_nb.BlueprintError is BlueprintError


# ------------------------------------------------------------------------------------------------
# The CLI (run in this process by the ``lev`` fixture)
# ------------------------------------------------------------------------------------------------
def test_cli_valid_folder_exits_0_and_prints_the_summary(lev: Lev) -> None:
    proc = lev("validate", str(FIXTURES / "lints" / "unknown-tool" / ".." / "clean"))
    assert proc.returncode == 0, proc.stderr
    assert "✓ Blueprint 'lint-fixture' is valid." in proc.stdout
    assert "  Graph mode: entry stage 'work'" in proc.stdout
    assert "  - work → report" in proc.stdout and "  - report (terminal)" in proc.stdout


def test_cli_errors_exit_1_with_the_summary_line(lev: Lev) -> None:
    proc = lev("validate", str(FIXTURES / "lints" / "unknown-tool" / "agent.leviath"))
    assert proc.returncode == 1
    assert "[unknown-tool]" in proc.stdout and "1 script tool(s) in tools/" in proc.stdout
    assert proc.stderr.strip() == "Error: ✗ Blueprint has 1 error"


def test_cli_json_shape_and_exit_status(lev: Lev, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")  # a reachable provider: no-reachable-provider is not tested here
    proc = lev("validate", "--json", str(FIXTURES / "lints" / "unparseable-safe-command"))
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert set(data) == {"valid", "blueprint", "error", "findings", "errors", "warnings", "notes", "models"}
    assert set(data["models"]) == {"default_provider", "default_model", "stages"}
    assert set(data["models"]["stages"][0]) == {"stage", "model", "missing_key", "refused", "blueprint_order"}
    assert data["valid"] is False and (data["errors"], data["warnings"], data["notes"]) == (1, 0, 1)
    assert [f["code"] for f in data["findings"]] == ["unparseable-safe-command", "safe-commands-declared"]
    assert set(data["findings"][0]) == {"severity", "code", "stage", "message", "fix"}


def test_cli_deny_warnings(lev: Lev, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")  # a reachable provider: no-reachable-provider is not tested here
    folder = str(FIXTURES / "lints" / "stage-missing-model")
    assert lev("validate", folder).returncode == 0
    proc = lev("validate", "--deny-warnings", "--json", folder)
    assert proc.returncode == 1 and json.loads(proc.stdout)["valid"] is False
    assert "1 warning (--deny-warnings)" in proc.stderr


def test_cli_parse_error_json_then_stderr_line(lev: Lev) -> None:
    proc = lev("validate", "--json", str(FIXTURES / "invalid" / "p22-unknown-condition"))
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert data["blueprint"] is None and data["findings"] == [] and data["errors"] == 1
    assert data["error"].startswith("parse error: ") and data["valid"] is False
    assert proc.stderr.startswith("Error: ✗ Parse error: ") and "stages.a.transitions.b.condition" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_validation_failure_text(lev: Lev) -> None:
    proc = lev("validate", str(FIXTURES / "invalid" / "v15-no-terminal-path"))
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("Error: ✗ Validation failed: ")


def test_cli_missing_manifest_prints_no_json(tmp_path: Path, lev: Lev) -> None:
    proc = lev("validate", "--json", str(tmp_path))
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("Error: No agent.leviath found at")


def test_cli_usage_error_exits_2(lev: Lev) -> None:
    assert lev("validate", "--bogus").returncode == 2


def test_cli_schema_prints_a_json_schema(lev: Lev) -> None:
    proc = lev("schema")
    assert proc.returncode == 0
    schema = json.loads(proc.stdout)
    assert schema["required"] == ["agent"]
    edge = schema["$defs"]["Edge"]
    assert edge["additionalProperties"] is False and "target" not in edge["properties"]
    assert edge["properties"]["condition"]["enum"][0] == "always"
