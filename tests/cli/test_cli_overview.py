"""``lev --help`` is answered from lev_nb.cli.overview without building the full parser (issue 29):
its command list is the full parser's, and its page is argparse's at every terminal width."""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys

import pytest

from lev_nb.cli import build_parser
from lev_nb.cli.overview import COMMAND_SUMMARIES, NARROWEST, overview_parser, overview_text


def test_the_summaries_are_the_commands_the_full_parser_registers() -> None:
    (group,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert [(a.dest, a.help) for a in group._choices_actions] == list(COMMAND_SUMMARIES)


@pytest.mark.parametrize("columns", [NARROWEST, 67, 80, 101, 133, 220])
def test_the_overview_page_is_the_page_argparse_prints(columns: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    full = build_parser().format_help()
    assert overview_parser().format_help() == full
    assert overview_text(columns) == full


def test_lev_help_builds_no_parser_and_imports_no_command() -> None:
    code = ("import sys\nfrom lev_nb.cli import main\nassert main(['--help']) == 0\n"
            "print('LOADED:' + ','.join(m for m in ('argparse', 'typing', 'lev_nb.cli.app', 'lev_nb.cli.run_commands')"
            " if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"} | {k: v for k, v in __import__("os").environ.items()
                                                                          if k == "PYTHONPATH"})
    assert out.returncode == 0, out.stderr
    assert "usage: lev" in out.stdout and out.stdout.strip().splitlines()[-1] == "LOADED:"


@pytest.mark.parametrize("text", [summary for _, summary in COMMAND_SUMMARIES] + [
    "override a setting for this command, e.g. -c limits.max_concurrent_inferences=4 (highest precedence; repeatable)",
    "a well-known key-free dry run --follow (SIGTERM; --force: SIGKILL) of a .leviath-bundle",
    "averyveryverylongwordthatcannotfitonanyline and then some",
])
def test_the_overview_wraps_text_as_textwrap_does(text: str) -> None:
    import textwrap

    from lev_nb.cli.overview import wrap

    for width in range(11, 120):
        assert wrap(text, width) == textwrap.wrap(text, width), width


def test_lev_help_and_version_load_no_module_a_bare_interpreter_does_not_beyond_lev_nb_s_own() -> None:
    # What keeps `lev --help` near the interpreter's own start-up: not even enum, re or typing.
    bare = subprocess.run([sys.executable, "-c", "import sys; print(sorted(sys.modules))"],
                          capture_output=True, text=True, timeout=120, check=True).stdout
    for argv in (["--help"], ["--version"]):
        code = ("import sys\nfrom lev_nb.cli import main\nassert main(" + repr(argv) + ") == 0\n"
                "print(sorted(sys.modules))\n")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        loaded = set(ast.literal_eval(out.stdout.strip().splitlines()[-1])) - set(ast.literal_eval(bare))
        assert {m for m in loaded if not m.startswith("lev_nb")} == set(), argv
        assert loaded <= {"lev_nb", "lev_nb.cli", "lev_nb.cli.overview", "lev_nb.version", "lev_nb.engine",
                          "lev_nb.engine.views"}, argv


def test_lev_version_prints_what_the_full_parser_prints(capsys: pytest.CaptureFixture[str]) -> None:
    from lev_nb.cli import main

    assert main(["--version"]) == 0
    fast = capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out == fast
