"""Issue 25: ``-v/--verbose`` is accepted by every ``lev`` command, before or after it, and adds
something real to each: the debug log everywhere, and per command what ``verbosity.ADDS`` says."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import pytest

from lev_nb.cli import build_parser
from lev_nb.cli.verbosity import ADDS

TRIAGE = str(Path(__file__).resolve().parents[2] / "blueprints" / "triage")


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _commands(sub, path + (name,))
    return found


def test_every_command_and_subcommand_takes_the_flag() -> None:
    commands = _commands(build_parser())
    assert len(commands) > 25
    for path, parser in commands:
        options = {o for a in parser._actions for o in a.option_strings}
        assert {"-v", "--verbose"} <= options, path
    helps = {path[0]: p.format_help() for path, p in commands if len(path) == 1}
    for command, adds in ADDS.items():  # --help says what the flag adds there
        assert " ".join(adds.split())[:40] in " ".join(helps[command].split()), command


def _run(lev, home: Path) -> str:
    done = lev("run", TRIAGE, "--task", "disk full on db1", "--model", "mock", "--quiet")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_ps_verbose_adds_model_start_and_workdir_before_or_after_the_command(lev, home: Path) -> None:
    run_id = _run(lev, home)
    plain = lev("ps").stdout
    assert "MODEL" not in plain and "WORKDIR" not in plain
    for argv in (("-v", "ps"), ("ps", "-v"), ("ps", "--verbose")):
        out = lev(*argv).stdout
        header, row = out.splitlines()[:2]
        names = header.split()
        assert names[names.index("WARN") + 1:names.index("WARN") + 4] == ["MODEL", "STARTED", "WORKDIR"], argv
        assert run_id in row and " mock " in row and str(home / "runs" / run_id / "workdir") in row


def test_show_verbose_tells_every_event(lev, home: Path) -> None:
    run_id = _run(lev, home)
    plain, verbose = lev("show", run_id).stdout, lev("show", "-v", run_id).stdout
    assert "Events:" not in plain
    assert verbose.startswith(plain) and "Events:" in verbose and "Run complete." in verbose.split("Events:")[1]


def test_validate_verbose_names_the_file_and_the_configuration(lev, home: Path) -> None:
    plain, verbose = lev("validate", TRIAGE).stdout, lev("validate", TRIAGE, "-v").stdout
    assert "Checked:" not in plain
    assert f"Checked: {(Path(TRIAGE) / 'agent.leviath').resolve()}" in verbose
    assert f"Linted under: {home / 'config.toml'}" in verbose


def test_doctor_verbose_runs_every_check_after_a_failure(lev, home: Path) -> None:
    import json

    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[limits]\nmax_concurrent_tools = 'many'\n")  # the config check fails
    plain = lev("doctor", "--model", "mock", "--json")
    verbose = lev("-v", "doctor", "--model", "mock", "--json")
    assert plain.returncode == verbose.returncode == 1
    quiet = {c["name"]: c for c in json.loads(plain.stdout)["checks"]}
    loud = {c["name"]: c for c in json.loads(verbose.stdout)["checks"]}
    assert quiet["config"]["ok"] is False and loud["config"]["ok"] is False
    assert quiet["rhai"]["ok"] is None and quiet["store"]["detail"] == "not run: config failed"
    assert loud["rhai"]["ok"] is True and loud["store"]["ok"] is True  # checked anyway
    assert loud["run"]["ok"] in (None, False)  # needs the configuration: said, never a traceback
    assert "Traceback" not in verbose.stderr


def test_config_verbose_lists_the_environment(lev, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[limits]\nmax_concurrent_tools = 2\n")
    monkeypatch.setenv("LEV_MAX_CONCURRENT_TOOLS", "5")
    plain, verbose = lev("config").stdout, lev("config", "-v").stdout
    assert "environment variables that set a key" not in plain
    line = next(x for x in verbose.splitlines() if "LEV_MAX_CONCURRENT_TOOLS " in x)
    assert "limits.max_concurrent_tools: set, in effect" in line
    over = lev("-c", "limits.max_concurrent_tools=3", "config", "-v").stdout
    assert "set, overridden by launch option (-c)" in next(x for x in over.splitlines() if "LEV_MAX_CONCURRENT_TOOLS " in x)
    assert "LEV_DEFAULT_MODEL" in verbose and "not set" in next(x for x in verbose.splitlines() if "LEV_DEFAULT_MODEL " in x)


def test_the_debug_log_reaches_stderr_only_with_the_flag(lev, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lev_nb.cli import config_commands

    real = config_commands.run_config

    def logging_config(args: argparse.Namespace) -> int:
        logging.getLogger("lev_nb.settings").debug("reading the configuration")
        return real(args)

    monkeypatch.setattr(config_commands, "run_config", logging_config)
    assert "reading the configuration" not in lev("config", "path").stderr
    assert "lev: debug: lev_nb.settings: reading the configuration" in lev("config", "-v", "path").stderr
    assert logging.getLogger("lev_nb").level == logging.NOTSET  # put back after the command
