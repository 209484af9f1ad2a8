"""``lev --help`` and every command's help: examples, the environment variables, a description for
every command and a help line for every option; and ``lev --help`` stays quick by importing nothing
heavy (its time is measured by bench/bench_cli_startup.py, never asserted here)."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest
from support import Lev

from lev_nb.cli import build_parser
from lev_nb.settings.paths import CONFIG_ENV
from lev_nb.settings.schema import ENVIRONMENT


def commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (group,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(group.choices)


def test_top_level_help_has_examples_and_every_environment_variable(lev: Lev) -> None:
    out = lev("--help")
    assert out.returncode == 0
    text = out.stdout
    assert "examples:\n  lev validate triage" in text
    assert "lev run blueprints/triage --task @blueprints/triage/reports.txt --model mock" in text
    assert "environment:\n" in text
    for variable in ["LEV_HOME", CONFIG_ENV, "ANTHROPIC_API_KEY", *(name for name, _ in ENVIRONMENT)]:
        assert f"\n  {variable} " in text, variable
    for name in commands():
        assert f"    {name} " in text


@pytest.mark.parametrize("name", sorted(commands()))
def test_every_command_has_a_description_and_every_option_a_help_line(name: str, lev: Lev) -> None:
    command = commands()[name]
    assert command.description, f"lev {name} has no description"
    for action in command._actions:
        assert action.help, f"lev {name}: {action.option_strings or action.dest} has no help"
    out = lev(name, "--help")
    assert out.returncode == 0 and command.description.split()[0] in out.stdout


def test_top_level_options_have_help() -> None:
    for action in build_parser()._actions:
        if not isinstance(action, argparse._SubParsersAction):
            assert action.help, action.option_strings


def test_help_imports_nothing_heavy() -> None:
    # What keeps `lev --help` quick: no engine, no pydantic models, no SDK, no native module.
    code = (
        "import sys\n"
        "from lev_nb.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = ['lev_nb.engine.runner', 'lev_nb.blueprint.model', 'pydantic', 'anthropic', 'lev_nb._rhai',"
        " 'lev_nb.settings.schema', 'lev_nb.settings.loader']\n"
        "print('HEAVY:' + ','.join(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "HEAVY:"
