"""The %lev / %%lev / %%rhai magics, driven through a real IPython shell."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from support import ROOT

import lev_nb
from lev_nb.engine.handle import Run
from lev_nb.notebook.magics import LevMagics, interpolate
from lev_nb.notebook.widget import RunWidget
from lev_nb.scripting import Invalid, Valid, Validator

TRIAGE = str(ROOT / "blueprints" / "triage")
RUN_TIMEOUT_S = 60


@pytest.fixture
def ip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    """The IPython shell with the extension loaded, a private LEV_HOME and a clean namespace."""
    monkeypatch.setenv("LEV_HOME", str(tmp_path / "home"))
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "lev_nb.notebook")
    shown: list[Any] = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    shell.user_ns["_shown"] = shown
    yield shell
    shell.magics_manager.registry["LevMagics"].default_model = ""
    for name in ("_lev_run", "myrun", "validator", "v", "out", "n", "ticket"):
        shell.user_ns.pop(name, None)


def one_line_usage_error(excinfo: pytest.ExceptionInfo[UsageError]) -> str:
    message = str(excinfo.value)
    assert message and "\n" not in message and "Traceback" not in message
    return message


# -- %lev ------------------------------------------------------------------------------------
def test_graph_bundle_is_mermaid_plain_and_svg(ip: InteractiveShell) -> None:
    graph = ip.run_line_magic("lev", f"graph {TRIAGE} --current check")
    data, _meta = ip.display_formatter.format(graph)
    assert set(data) == {"text/vnd.mermaid", "text/plain", "image/svg+xml"}
    assert data["text/vnd.mermaid"] == data["text/plain"]
    assert data["text/plain"] == lev_nb.load(TRIAGE).mermaid(current="check")
    assert "class s_check current" in data["text/plain"]


def test_validate_returns_the_report(ip: InteractiveShell) -> None:
    report = ip.run_line_magic("lev", f"validate {TRIAGE}")
    assert report.valid and report.blueprint.agent.name == "triage"


def test_validate_of_a_missing_blueprint_is_one_line(ip: InteractiveShell, tmp_path: Path) -> None:
    with pytest.raises(UsageError) as excinfo:
        ip.run_line_magic("lev", f"validate {tmp_path / 'nowhere'}")
    assert "No agent.leviath found" in one_line_usage_error(excinfo)


def test_unknown_subcommand_and_unknown_stage_are_usage_errors(ip: InteractiveShell) -> None:
    with pytest.raises(UsageError) as excinfo:
        ip.run_line_magic("lev", "frobnicate")
    assert "unknown command 'frobnicate'" in one_line_usage_error(excinfo)
    with pytest.raises(UsageError) as excinfo:
        ip.run_line_magic("lev", f"valdate {TRIAGE}")
    assert one_line_usage_error(excinfo).startswith("%lev: unknown command 'valdate' (did you mean 'validate'?)")
    with pytest.raises(UsageError) as excinfo:
        ip.run_line_magic("lev", "status")
    assert one_line_usage_error(excinfo).startswith("%lev: unknown command 'status' (did you mean 'ps'?)")
    with pytest.raises(UsageError) as excinfo:
        ip.run_line_magic("lev", f"graph {TRIAGE} --current nope")
    assert "no stage 'nope'" in one_line_usage_error(excinfo)


def test_help_and_ps(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_line_magic("lev", "help")
    assert "%%lev PATH [VAR]" in capsys.readouterr().out
    ip.run_line_magic("lev", "ps")
    assert "no runs yet" in capsys.readouterr().out


# -- %%lev -----------------------------------------------------------------------------------
def test_cell_magic_starts_a_run_stores_it_and_shows_the_widget(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    ip.user_ns["ticket"] = "R-7"
    result = ip.run_cell_magic("lev", f"{TRIAGE} myrun --model mock", "Triage {ticket}: crash on save")
    assert result is None  # returns at once; the widget is the display
    run = ip.user_ns["myrun"]
    assert isinstance(run, Run)
    run.wait(RUN_TIMEOUT_S)
    assert run.status == "complete" and run.meta["task"] == "Triage R-7: crash on save"
    (view,) = ip.user_ns["_shown"]
    assert isinstance(view, RunWidget) and view.run is run
    deadline = time.monotonic() + 5
    while view.status != "complete" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "width:100%" in view.progress.value and "data-status='complete'" in view.header.value
    ip.run_line_magic("lev", "ps")
    assert run.run_id in capsys.readouterr().out


def test_default_model_comes_from_config_and_default_var(ip: InteractiveShell) -> None:
    ip.run_line_magic("config", 'LevMagics.default_model = "mock"')
    ip.run_cell_magic("lev", TRIAGE, "R-1")
    run = ip.user_ns["_lev_run"].wait(RUN_TIMEOUT_S)
    assert run.status == "complete" and run.stage_history == ["read", "check", "table"]


def test_default_model_falls_back_to_the_notebook_setting(ip: InteractiveShell) -> None:
    lev_nb.configure(notebook={"model": "mock"})
    ip.run_cell_magic("lev", TRIAGE, "R-2")
    run = ip.user_ns["_lev_run"].wait(RUN_TIMEOUT_S)
    assert run.status == "complete"


def test_a_broken_configuration_is_one_line_when_it_is_needed(ip: InteractiveShell, tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.toml").write_text('[notebook]\nmodel = 7\n')
    with pytest.raises(UsageError) as excinfo:
        ip.run_cell_magic("lev", TRIAGE, "task")
    assert "notebook.model: expected a string" in one_line_usage_error(excinfo)
    # A run reads the configuration (it may tighten tool permissions), so a broken one stops it too.
    with pytest.raises(UsageError) as excinfo:
        ip.run_cell_magic("lev", f"{TRIAGE} --model mock", "task")
    assert "notebook.model: expected a string" in one_line_usage_error(excinfo)


def test_lev_config_shows_the_settings(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    lev_nb.configure(notebook={"model": "mock"})
    ip.run_line_magic("lev", "config")
    out = capsys.readouterr().out
    assert "# configuration file:" in out and 'notebook.model = "mock"' in out and "session (lev_nb.configure)" in out


def test_lev_models_lists_and_shows(ip: InteractiveShell, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    ip.run_line_magic("lev", "models list -p openai")
    assert "gpt-4.1" in capsys.readouterr().out
    ip.run_line_magic("lev", "models show openai/gpt-4o")
    assert "context window: 128000 tokens" in capsys.readouterr().out
    with pytest.raises(UsageError):
        ip.run_line_magic("lev", "models list -p nowhere")


def test_cell_magic_errors_are_one_line(ip: InteractiveShell) -> None:
    with pytest.raises(UsageError) as excinfo:
        ip.run_cell_magic("lev", f"{TRIAGE} --model bogus", "task")
    assert "'bogus' is not a model spec" in one_line_usage_error(excinfo)
    with pytest.raises(UsageError) as excinfo:
        ip.run_cell_magic("lev", f"{TRIAGE} 1run --model mock", "task")
    assert "not a valid Python variable name" in one_line_usage_error(excinfo)
    assert "_lev_run" not in ip.user_ns


def test_interpolation_leaves_unknown_names_and_json_alone() -> None:
    assert interpolate('fix {bug} in {"a": 1} and {missing}', {"bug": "R-1"}) == 'fix R-1 in {"a": 1} and {missing}'


# -- %%rhai ----------------------------------------------------------------------------------
def test_rhai_evaluates_the_cell(ip: InteractiveShell) -> None:
    assert ip.run_cell_magic("rhai", "", "let x = 40;\nx + 2") == 42
    assert ip.run_cell_magic("rhai", "out", '"a" + "b"') == "ab" and ip.user_ns["out"] == "ab"


def test_rhai_call_passes_notebook_variables(ip: InteractiveShell) -> None:
    ip.user_ns["n"] = 21
    assert ip.run_cell_magic("rhai", "--call double --arg n", "fn double(x) { x * 2 }") == 42


def test_rhai_validate_stores_a_working_validator(ip: InteractiveShell) -> None:
    source = 'fn validate(content) { if content.len() < 3 { "too short" } }'
    ip.run_cell_magic("rhai", "--validate", source)
    validator = ip.user_ns["validator"]
    assert isinstance(validator, Validator)
    assert validator.check("ab") == Invalid("too short")
    assert validator.check("abcd") == Valid()
    ip.run_cell_magic("rhai", "--validate v", source)
    assert isinstance(ip.user_ns["v"], Validator)


def test_rhai_errors_are_one_line_with_the_line_number(ip: InteractiveShell) -> None:
    with pytest.raises(UsageError) as excinfo:
        ip.run_cell_magic("rhai", "", "let a = 1;\nlet b = ;")
    assert "line 2" in one_line_usage_error(excinfo)
    with pytest.raises(UsageError) as excinfo:
        ip.run_cell_magic("rhai", "", 'let a = 1;\nthrow "boom";')
    message = one_line_usage_error(excinfo)
    assert "boom" in message and "line 2" in message
    with pytest.raises(UsageError) as excinfo:
        ip.run_cell_magic("rhai", "--validate", "fn nope() {}")
    assert "fn validate(content)" in one_line_usage_error(excinfo)
    assert "validator" not in ip.user_ns


def test_rhai_runaway_script_is_stopped(ip: InteractiveShell) -> None:
    with pytest.raises(UsageError) as excinfo:
        ip.run_cell_magic("rhai", "", "loop { }")
    assert "Too many operations" in one_line_usage_error(excinfo)


def test_run_cell_reports_a_usage_error_not_a_traceback(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    result = ip.run_cell("%%rhai\nlet a = 1;\nlet b = ;")
    assert isinstance(result.error_in_exec, UsageError)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    assert "UsageError: Rhai: Syntax error" in captured.out + captured.err


def test_default_model_is_a_config_trait() -> None:
    assert LevMagics.class_traits()["default_model"].metadata.get("config") is True
