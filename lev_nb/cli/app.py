"""The full ``lev`` parser and the dispatch of a command line to its command: every command module
is imported here (``lev --help`` is answered from lev_nb.cli.overview without them).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from lev_nb.cli import (
    agent_commands,
    approvals_command,
    blueprint_commands,
    config_commands,
    doctor_commands,
    eval_commands,
    inspect_commands,
    interaction_commands,
    mcp_commands,
    models_commands,
    policy_commands,
    run_commands,
    tools_command,
    verbosity,
)

from lev_nb.cli.overview import top_parser

# The subcommands in the order ``lev --help`` lists them.
COMMANDS = (
    blueprint_commands.add_validate,
    blueprint_commands.add_schema,
    run_commands.add_run,
    run_commands.add_resume,
    run_commands.add_ps,
    run_commands.add_result,
    inspect_commands.add_show,
    inspect_commands.add_log,
    inspect_commands.add_context,
    inspect_commands.add_stages,
    inspect_commands.add_cancel,
    inspect_commands.add_kill,
    interaction_commands.add_msg,
    interaction_commands.add_respond,
    blueprint_commands.add_graph,
    agent_commands.add_list,
    agent_commands.add_add,
    agent_commands.add_remove,
    agent_commands.add_create,
    agent_commands.add_pack,
    eval_commands.add_eval,
    eval_commands.add_evals,
    eval_commands.add_test,
    tools_command.add_tools,
    approvals_command.add_approvals,
    config_commands.add_config,
    doctor_commands.add_doctor,
    models_commands.add_models,
    mcp_commands.add_mcp,
    policy_commands.add_policy,
)


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser for every ``lev`` subcommand."""
    parser, subparsers = top_parser()
    for add in COMMANDS:
        add(subparsers)
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


def run(argv: list[str]) -> int:
    """Parse ``argv`` and run its command; returns the exit status."""
    import warnings

    warnings.showwarning = _show_config_warning(warnings.showwarning)
    parser = build_parser()
    # `lev run` takes the blueprint's caller inputs as free-form --<input> options: set them aside
    # before argparse, which then refuses anything else it does not know.
    argv, extra = run_commands.split_run_argv(argv)
    argv = mcp_commands.join_option_values(argv)
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
        from lev_nb.settings import ConfigError, launch_options

        try:
            overrides = config_commands.launch_overrides(args.settings)
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
