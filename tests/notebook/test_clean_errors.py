"""lev_nb's own exceptions in a notebook: one clean block (what, where, what to do), while %tb and
%xmode Verbose still show the whole traceback."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from support import ROOT

import lev_nb
from lev_nb.blueprint import BlueprintError
from lev_nb.errors import FULL_TRACEBACK_HINT, CleanError, Problem, UsageError, clean_block
from lev_nb.rhai import RhaiError, RhaiSyntaxError
from lev_nb.scripting import ScriptError

TRIAGE = ROOT / "blueprints" / "triage"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture
def ip() -> Iterator[InteractiveShell]:
    shell = InteractiveShell.instance()
    shell.user_ns["lev_nb"] = lev_nb
    mode = shell.InteractiveTB.mode
    yield shell
    shell.InteractiveTB.set_mode(mode)


def shown(capsys: pytest.CaptureFixture[str]) -> str:
    """What the shell printed for the last cell, without colours."""
    captured = capsys.readouterr()
    return ANSI.sub("", captured.out + captured.err)


def test_a_missing_blueprint_is_a_short_block_naming_the_path_once(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    result = ip.run_cell('lev_nb.load("no/such/path")')
    assert isinstance(result.error_in_exec, BlueprintError)
    text = shown(capsys)
    assert text.splitlines() == [
        "BlueprintError: No agent.leviath found at no/such/path: no such file or folder",
        "    what to do: pass an agent folder or its agent.leviath file",
        FULL_TRACEBACK_HINT,
    ]
    assert text.count("no/such/path") == 1
    # The exception's own text names the path once too (plain Python, logs, %lev's one line).
    assert str(result.error_in_exec).count("no/such/path") == 1


def test_tb_shows_the_full_traceback_afterwards(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell('lev_nb.load("no/such/path")')
    shown(capsys)
    ip.run_line_magic("tb", "")
    text = shown(capsys)
    assert "Traceback" in text and "loader.py" in text and FULL_TRACEBACK_HINT not in text


def test_xmode_verbose_shows_the_full_traceback(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_line_magic("xmode", "Verbose")
    shown(capsys)
    ip.run_cell('lev_nb.load("no/such/path")')
    text = shown(capsys)
    assert "Traceback" in text and "loader.py" in text
    ip.run_line_magic("xmode", "Context")
    shown(capsys)
    ip.run_cell('lev_nb.load("no/such/path")')
    assert "Traceback" not in shown(capsys)


def test_a_blueprint_error_says_file_line_column_and_key(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "agent.leviath").write_text(
        '[agent]\nname = "x"\n[stages.a]\nmode = "autonomus"\n', encoding="utf-8"
    )
    ip.user_ns["folder"] = str(tmp_path)
    ip.run_cell("lev_nb.load(folder)")
    lines = shown(capsys).splitlines()
    assert lines[0].startswith("BlueprintError: ") and "autonomus" in lines[0]
    assert lines[1] == f"    where: {tmp_path / 'agent.leviath'}:4:1, key stages.a.mode"
    assert lines[-1] == FULL_TRACEBACK_HINT
    assert not any("Traceback" in line or ".py" in line for line in lines)


def test_a_rhai_error_is_one_line_with_its_position(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell('from lev_nb.rhai import Engine\nEngine().eval("let x = ;")')
    assert shown(capsys).splitlines() == [
        "RhaiSyntaxError: Syntax error: Unexpected ';' (line 1, position 9)",
        FULL_TRACEBACK_HINT,
    ]


def test_a_script_error_is_clean(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell('from lev_nb.scripting import compile_validator\ncompile_validator(source="fn nope() {}", label="cell")')
    lines = shown(capsys).splitlines()
    assert lines[0].startswith("ScriptError: Script compilation failed: cell") and lines[-1] == FULL_TRACEBACK_HINT
    assert len(lines) <= 3


def test_a_bad_model_spec_is_a_usage_error_with_the_accepted_forms(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    ip.user_ns["path"] = str(TRIAGE)
    result = ip.run_cell('lev_nb.load(path).run("task", model="bogus")')
    assert isinstance(result.error_in_exec, UsageError) and isinstance(result.error_in_exec, ValueError)
    lines = shown(capsys).splitlines()
    assert lines[0] == "LaunchError: model 'bogus' is not a model spec"  # a UsageError raised before the run exists
    assert lines[1].startswith("    what to do: use 'mock', 'scripted:FILE'")
    # Its plain text is unchanged: one sentence with what to use.
    assert str(result.error_in_exec).startswith("model 'bogus' is not a model spec; use 'mock'")


def test_every_lev_nb_error_class_renders_cleanly() -> None:
    for cls in (BlueprintError, ScriptError, UsageError):
        assert issubclass(cls, CleanError)
    for cls in (RhaiError, RhaiSyntaxError):
        assert hasattr(cls, "_render_traceback_")


def test_clean_block_layout() -> None:
    block = [ANSI.sub("", line) for line in clean_block("X", Problem("what", "f.leviath:1:2", "do this"))]
    assert block == ["X: what", "    where: f.leviath:1:2", "    what to do: do this", FULL_TRACEBACK_HINT]


def test_outside_ipython_render_gives_the_clean_block(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("IPython.get_ipython", lambda: None)
    exc = UsageError("bad value", "use 1 or 2")
    assert [ANSI.sub("", line) for line in exc._render_traceback_()][:2] == [
        "UsageError: bad value", "    what to do: use 1 or 2",
    ]
