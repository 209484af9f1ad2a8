"""The ``lev`` parser and the dispatch of a command line to its command (``lev --help`` is answered
from lev_nb.cli.overview without any of this).

A command line registers in full only the commands it names: the others are listed by name and
help line, as ``lev --help`` shows them, and their modules are not imported, so that ``lev validate``
does not pay for building and importing thirty commands. :func:`build_parser` without ``only`` builds
the whole parser.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Collection
from importlib import import_module
from typing import Any

from lev_nb.cli import verbosity
from lev_nb.cli.overview import COMMAND_SUMMARIES, top_parser

# The subcommands in the order ``lev --help`` lists them: name, module (in lev_nb.cli), what registers it.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("validate", "blueprint_commands", "add_validate"),
    ("schema", "blueprint_commands", "add_schema"),
    ("run", "run_commands", "add_run"),
    ("resume", "run_commands", "add_resume"),
    ("ps", "run_commands", "add_ps"),
    ("result", "run_commands", "add_result"),
    ("show", "inspect_commands", "add_show"),
    ("log", "inspect_commands", "add_log"),
    ("context", "inspect_commands", "add_context"),
    ("stages", "inspect_commands", "add_stages"),
    ("cancel", "inspect_commands", "add_cancel"),
    ("kill", "inspect_commands", "add_kill"),
    ("msg", "interaction_commands", "add_msg"),
    ("respond", "interaction_commands", "add_respond"),
    ("graph", "blueprint_commands", "add_graph"),
    ("list", "agent_commands", "add_list"),
    ("add", "agent_commands", "add_add"),
    ("remove", "agent_commands", "add_remove"),
    ("create", "agent_commands", "add_create"),
    ("pack", "agent_commands", "add_pack"),
    ("eval", "eval_commands", "add_eval"),
    ("evals", "eval_commands", "add_evals"),
    ("test", "eval_commands", "add_test"),
    ("tools", "tools_command", "add_tools"),
    ("approvals", "approvals_command", "add_approvals"),
    ("config", "config_commands", "add_config"),
    ("doctor", "doctor_commands", "add_doctor"),
    ("models", "models_commands", "add_models"),
    ("mcp", "mcp_commands", "add_mcp"),
    ("policy", "policy_commands", "add_policy"),
)

# Words other tools use for what a lev command does: an unknown command that is one of them is
# answered with the command (``lev agents`` -> did you mean 'list'?), not with the nearest spelling.
SYNONYMS: dict[str, str] = {
    "agents": "list", "install": "add", "uninstall": "remove", "rm": "remove", "new": "create",
    "init": "create", "status": "ps", "runs": "ps", "logs": "log", "events": "log", "stop": "cancel",
    "check": "validate", "lint": "validate", "answer": "respond", "approve": "respond", "send": "msg",
    "message": "msg", "bundle": "pack", "output": "result", "draw": "graph", "settings": "config",
}


def guess_command(word: str, names: Collection[str]) -> str | None:
    """"did you mean ...?" for an unknown command ``word`` among ``names``: the command another
    tool's word stands for (:data:`SYNONYMS`), else the nearest spelling, else None."""
    from lev_nb.blueprint.errors import did_you_mean

    synonym = SYNONYMS.get(word.lower())
    if synonym in names:
        return f"did you mean '{synonym}'?"
    return did_you_mean(word, names)


def build_parser(only: Collection[str] | None = None) -> argparse.ArgumentParser:
    """Build the argument parser for every ``lev`` subcommand; with ``only``, the commands not in it
    are registered by name and help line alone (what the top level's help and errors show of them)."""
    parser, subparsers = top_parser()
    summaries = dict(COMMAND_SUMMARIES)
    # A line that names a command and asks for no help never shows the others: they are left out
    # (thirty small parsers were a tenth of a `lev validate`).
    named = only is not None and not {"-h", "--help"} & set(only) and any(n in only for n, _, _ in COMMANDS)
    for name, module, add in COMMANDS:
        if only is None or name in only:
            getattr(import_module(f"lev_nb.cli.{module}"), add)(subparsers)
        elif not named:
            subparsers.add_parser(name, help=summaries[name])
    verbosity.add_everywhere(parser)  # -v on every command and sub-command (the top level has it already)
    return parser


def _show_config_warning(show: Any) -> Any:
    """``warnings.showwarning`` that prints a configuration warning as one ``lev: warning:`` line
    (compared by name: importing the settings here would slow down ``lev --help``)."""

    def showwarning(message: Any, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        if category.__name__ == "ConfigWarning":
            print(f"lev: warning: {message}", file=sys.stderr)
        else:
            show(message, category, *args, **kwargs)

    return showwarning


def _unknown_command_error(error: Any) -> Any:
    """The top parser's ``error``, saying a misspelt command's likely meaning in one line instead of
    argparse's list of all thirty commands."""

    def unknown_command(message: str) -> Any:
        import re

        found = re.match(r"argument COMMAND: invalid choice: '([^']*)'", message)
        if found is None:
            return error(message)
        word = found.group(1)
        hint = guess_command(word, [name for name, _, _ in COMMANDS])
        print(f"lev: unknown command '{word}'" + (f" ({hint})" if hint else "")
              + "; `lev --help` lists every command", file=sys.stderr)
        raise SystemExit(2)

    return unknown_command


def run(argv: list[str]) -> int:
    """Parse ``argv`` and run its command; returns the exit status."""
    import warnings

    warnings.showwarning = _show_config_warning(warnings.showwarning)
    # Every word of the line that names a command is registered in full (the command is one of them).
    parser = build_parser(only=set(argv))
    parser.error = _unknown_command_error(parser.error)  # type: ignore[method-assign]
    extra: list[tuple[str, str | None]] = []
    if "run" in argv:
        # `lev run` takes the blueprint's caller inputs as free-form --<input> options: set them aside
        # before argparse, which then refuses anything else it does not know.
        from lev_nb.cli.run_commands import split_run_argv

        argv, extra = split_run_argv(argv)
    if "mcp" in argv:
        from lev_nb.cli.mcp_commands import join_option_values

        argv = join_option_values(argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        _refuse_unknown(parser, args, unknown)
    args.extra = extra
    if args.command is None:
        parser.print_help()
        return 0
    func = getattr(args, "func", None)
    if func is None:
        return 0
    with verbosity.debug_log(verbosity.is_verbose(args)):
        return _call(func, args)


def _call(func: Any, args: argparse.Namespace) -> int:
    """Run one command's function under the ``-c`` launch options."""
    try:
        if not args.settings:
            return int(func(args))
        from lev_nb.cli.config_commands import launch_overrides
        from lev_nb.settings import ConfigError, launch_options

        try:
            overrides = launch_overrides(args.settings)
        except ConfigError as exc:
            print(f"lev: error: {exc}", file=sys.stderr)
            return 2
        with launch_options(overrides):
            return int(func(args))
    except BrokenPipeError:
        # The reader went away (`lev ps | head`): stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _refuse_unknown(parser: argparse.ArgumentParser, args: argparse.Namespace, unknown: list[str]) -> None:
    """argparse's "unrecognized arguments" usage error (exit 2), from the command's own parser and
    with a "did you mean" when an option of that command is close."""
    from lev_nb.blueprint.errors import unrecognized_arguments

    command = parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and args.command in action.choices:
            command = action.choices[args.command]
    command.error(unrecognized_arguments(unknown, [o for a in command._actions for o in a.option_strings]))
