"""The ``lev`` command line tool: the parser assembly and the entry point ``main``.

Every command and all terminal text live in this package: ``blueprint_commands`` (validate, schema,
graph), ``run_commands`` (run, resume, ps, result), ``interaction_commands`` (msg, respond, and the
prompt of ``lev run`` at a terminal), ``config_commands`` (config, and the global
``-c KEY=VALUE`` launch option), ``progress`` (the live line ``lev run`` prints on stderr) and
``run_status`` (how a recorded run is described; ``%lev ps`` and the notebook's run display use it
too) and ``inspect_commands`` (show, log, context, stages, cancel, kill: looking at a recorded run
and stopping one from outside). The console script ``lev`` is ``lev_nb.cli:main``; ``python -m lev_nb.cli``
runs the same.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any

from lev_nb.version import __version__
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


# The environment variables lev reads, as `lev --help` lists them. Written out here rather than read
# from lev_nb.settings.schema.ENVIRONMENT so that `lev --help` imports nothing heavy; a test checks
# that every variable ENVIRONMENT names is listed.
ENVIRONMENT_HELP: tuple[tuple[str, str], ...] = (
    ("LEV_HOME", "where runs are recorded and config.toml lives (default: ~/.lev)"),
    ("LEV_CONFIG", "read this configuration file instead of $LEV_HOME/config.toml"),
    ("LEVIATH_HOME", "the upstream's name for LEV_HOME, read when LEV_HOME is not set"),
    ("LEVIATH_CONFIG_PATH", "the upstream's name for LEV_CONFIG, read when LEV_CONFIG is not set"),
    ("ANTHROPIC_API_KEY", "the key for anthropic models (config.toml may name another variable)"),
    ("ANTHROPIC_BASE_URL", "another endpoint for the Anthropic API"),
    ("OPENAI_API_KEY", "the key for openai models (OPENAI_BASE_URL: another endpoint)"),
    ("OPENROUTER_API_KEY", "the key for openrouter models"),
    ("OLLAMA_HOST", "where the Ollama server listens (default: localhost:11434)"),
    ("LEV_DEFAULT_PROVIDER", "provider of a stage that names no model (default: anthropic)"),
    ("LEV_DEFAULT_MODEL", "model of a stage that names none, on the default provider"),
    ("LEV_MAX_CONCURRENT_INFERENCES", "model calls in flight at once"),
    ("LEV_MAX_CONCURRENT_TOOLS", "tool calls running at once (the tool pool)"),
    ("LEV_DEFAULT_MAX_ITERATIONS", "max_iterations of a stage that sets none (0: unlimited)"),
    ("LEV_INTERACTION_TIMEOUT_SECS", "how long a question to a person may go unanswered"),
    ("LEV_REQUEST_TIMEOUT_SECS", "per-request model timeout"),
    ("LEV_INFERENCE_RETRY_ATTEMPTS", "tries of a model call on transient errors"),
    ("LEV_NOTEBOOK_MODEL", "model spec of a notebook run that names none"),
    ("LEV_TITLE_ENABLED", "false: runs get no generated title ([title] enabled)"),
)

EPILOG = """\
examples:
  lev validate triage                            check an agent by name or folder (exit 1 on errors)
  lev graph blueprints/triage                    its stage graph as Mermaid text
  lev run blueprints/triage --task @blueprints/triage/reports.txt --model mock
                                                 a key-free dry run; prints the run id
  lev run blueprints/code-fixer --task "Fix the failing test" --workdir my-project
                                                 each stage on its own model (ANTHROPIC_API_KEY)
  lev ps                                         recorded runs and their status
  lev resume RUN_ID                              continue a paused (or killed) run
  lev result RUN_ID                              a run's final answer
  lev show RUN_ID                                its story: stages, cost, warnings, the answer
  lev log RUN_ID --follow                        its events as sentences, as they happen
  lev cancel RUN_ID                              stop a run another process runs
  lev eval blueprints/triage cases.jsonl --check contains --model mock --min-pass 0.9
                                                 measure an agent over a dataset (exit 1 under 90%)
  lev test blueprints/triage --dry-run           check the agent's prompt tests (tests/*.toml)
  lev respond RUN_ID                             what a run waits for a person to answer
  lev config                                     every setting and where it came from
  lev doctor --model mock                        check this install end to end, offline
  lev COMMAND --help                             the options of one command

environment:
""" + "\n".join(f"  {name:<30} {text}" for name, text in ENVIRONMENT_HELP) + "\n"


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser for every ``lev`` subcommand."""
    parser = argparse.ArgumentParser(
        prog="lev",
        description="Design, check and run multi-stage LLM agents (lev_nb).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"lev {__version__}",
                        help="print the version of lev_nb and exit")
    config_commands.add_launch_options(parser)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for add in COMMANDS:
        add(subparsers)
    verbosity.add_everywhere(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``lev`` console script; returns the process exit status.

    A Ctrl-C stops the command with exit status 130 and one line, never a traceback: only the
    first one interrupts (a second one while the first unwinds is ignored), and ``lev run`` takes
    over while a run exists, cancelling it so that its record says so.
    """
    interrupted = False

    def first_only(signum: int, frame: Any) -> None:
        nonlocal interrupted
        if not interrupted:
            interrupted = True
            # Ignored from now on, by the kernel: a Python handler would be reset to the default
            # while the interpreter shuts down, and a late Ctrl-C would then kill the process.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGINT, first_only)
    except ValueError:  # not the main thread: no signal arrives here
        previous = None
    try:
        return _main(sys.argv[1:] if argv is None else list(argv))
    except KeyboardInterrupt:
        print("lev: interrupted", file=sys.stderr)
        return 130
    finally:
        # After a Ctrl-C the process is on its way out: leave later ones ignored until it is.
        if previous is not None and not interrupted and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, previous)


def _show_config_warning(show: Any) -> Any:
    """``warnings.showwarning`` that prints a configuration warning as one ``lev: warning:`` line
    (compared by name: importing the settings here would slow down ``lev --help``)."""

    def showwarning(message: Any, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        if category.__name__ == "ConfigWarning":
            print(f"lev: warning: {message}", file=sys.stderr)
        else:
            show(message, category, *args, **kwargs)

    return showwarning


def _main(argv: list[str]) -> int:
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
