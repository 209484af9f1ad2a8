"""What ``lev --help`` shows: the description, the global options, each command's one-line
summary, the examples and the environment variables.

``lev --help`` (and a bare ``lev``) is answered from here without importing the command modules,
the engine or the settings, and without argparse itself: :func:`overview_text` lays the page out
as argparse does (tests compare the two at every terminal width from 60 columns up; narrower
terminals get argparse's own layout). The full parser (lev_nb.cli.app) is built on the same top
level, and a test checks that ``COMMAND_SUMMARIES`` lists exactly the commands it registers, with
the same help lines, in the same order.
"""

# No `from __future__ import annotations`: importing __future__ is a measurable part of `lev --help`;
# names known only to type checkers are quoted instead.

import os
import sys

TYPE_CHECKING = False  # argparse (and typing) load only when a parser is built, not for `lev --help`
if TYPE_CHECKING:
    import argparse

DESCRIPTION = "Design, check and run multi-stage LLM agents (lev_nb)."

# Every command and its line in `lev --help`, in the order listed (each command's own module
# registers it with this same help line).
COMMAND_SUMMARIES: tuple[tuple[str, str], ...] = (
    ('validate', 'check a blueprint: parse, validate and lint it'),
    ('schema', 'print the JSON Schema of the blueprint format'),
    ('run', 'run a blueprint to the end in this process'),
    ('resume', 'continue a paused or killed run from its record'),
    ('ps', 'list runs'),
    ('result', "print a run's final output"),
    ('show', "tell a run's story: stages, cost, warnings, the answer"),
    ('log', "print a run's events as sentences (--follow: as they happen)"),
    ('context', "show what the model saw at a run's last request"),
    ('stages', "print a run's per-stage token ledger"),
    ('cancel', 'cancel a run (its record says cancelled)'),
    ('kill', 'stop the process that runs a run (SIGTERM; --force: SIGKILL)'),
    ('msg', 'send a message to a running agent'),
    ('respond', 'answer a run that waits for a person'),
    ('graph', 'print the blueprint as a Mermaid flowchart, or draw it as SVG/PNG'),
    ('list', 'the agents you can run by name'),
    ('add', 'install an agent folder or a .leviath-bundle'),
    ('remove', 'uninstall an agent'),
    ('create', 'start a new agent from a template'),
    ('pack', 'bundle an agent into a .leviath-bundle'),
    ('eval', 'measure an agent over a dataset'),
    ('evals', 'list recorded evaluations, show or compare them'),
    ('test', "run a blueprint's prompt tests (tests/*.toml, tests/*.rhai)"),
    ('tools', 'list the global Rhai tools ($LEV_HOME/tools/*.rhai)'),
    ('approvals', 'what runs without an approval prompt (lev approvals safe)'),
    ('config', 'show the effective settings and where each came from'),
    ('doctor', 'check what this install can do, end to end'),
    ('models', 'list the models each provider offers here, or show one'),
    ('mcp', 'manage MCP tool servers; serve agents as MCP tools'),
    ('policy', "the taint gate's policy: list, add or test rules"),
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


LAUNCH_HELP = ("override a setting for this command, e.g. -c limits.max_concurrent_inferences=4 "
               "(highest precedence; repeatable)")
VERSION_HELP = "print the version of lev_nb and exit"
VERBOSE_HELP = "more detail on any command (lev COMMAND --help says what it adds there)"
USAGE = "usage: lev [-h] [--version] [-c KEY=VALUE] [-v] COMMAND ..."
NARROWEST = len(USAGE) + 2  # columns: below this argparse wraps the usage line too, so it lays the page out


def add_launch_options(parser: "argparse.ArgumentParser") -> None:
    """The global ``-c KEY=VALUE`` option: override one setting for this command."""
    parser.add_argument("-c", dest="settings", action="append", default=[], metavar="KEY=VALUE", help=LAUNCH_HELP)


def top_parser() -> "tuple[argparse.ArgumentParser, argparse._SubParsersAction]":
    """The ``lev`` parser's top level (description, --version, -c, examples, environment) and its
    (still empty) group of commands."""
    import argparse

    from lev_nb.version import __version__

    parser = argparse.ArgumentParser(prog="lev", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"lev {__version__}", help=VERSION_HELP)
    add_launch_options(parser)
    # -v before the command (lev -v ps); lev_nb.cli.verbosity declares it on every command too.
    parser.add_argument("-v", "--verbose", action="store_true", default=False, help=VERBOSE_HELP)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    return parser, subparsers


def overview_parser() -> "argparse.ArgumentParser":
    """A parser that prints the same ``lev --help`` as the full one, each command only named."""
    parser, subparsers = top_parser()
    for name, summary in COMMAND_SUMMARIES:
        subparsers.add_parser(name, help=summary)
    return parser


def terminal_columns() -> int:
    """The width argparse would lay help out for (``shutil.get_terminal_size``'s answer)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def wrap(text: str, width: int) -> list[str]:
    """``textwrap.wrap(text, width)`` for a one-spaced ``text``, without importing textwrap (and
    ``re``, and ``enum``: together more than all of ``lev --help``) when its plain greedy fill gives
    the same lines: no word longer than a line, and no hyphen inside a word (textwrap may break there)."""
    words = text.split(" ")
    if len(text) <= width:
        return [text] if text else []
    if any(len(word) > width or "-" in word.lstrip("-") for word in words):
        import textwrap

        return textwrap.wrap(text, width)
    lines, line = [], words[0]
    for word in words[1:]:
        if len(line) + 1 + len(word) <= width:
            line += " " + word
        else:
            lines.append(line)
            line = word
    return lines + [line]


def overview_text(columns: int) -> str:
    """``lev --help`` laid out for a terminal ``columns`` wide, as argparse lays it out."""
    width = columns - 2
    options = (("-h, --help", "show this help message and exit"), ("--version", VERSION_HELP),
               ("-c KEY=VALUE", LAUNCH_HELP), ("-v, --verbose", VERBOSE_HELP))
    # Where argparse starts the help text: after the longest entry and two spaces, at most 24.
    longest = max([2 + len(name) for name, _ in options] + [4 + len(name) for name, _ in COMMAND_SUMMARIES])
    column = min(longest + 2, min(24, max(width - 20, 4)))

    def entry(indent: int, name: str, text: str) -> list[str]:
        text = " ".join(text.split())
        lines = wrap(text, max(width - column, 11))
        head = " " * indent + name
        if len(head) + 2 > column:  # argparse puts the help under an entry too long for the column
            return [head] + [" " * column + line for line in lines]
        return [head.ljust(column) + lines[0]] + [" " * column + line for line in lines[1:]]

    out = [USAGE, "", DESCRIPTION, "", "options:"]
    for name, text in options:
        out += entry(2, name, text)
    out += ["", "commands:", "  COMMAND"]
    for name, summary in COMMAND_SUMMARIES:
        out += entry(4, name, summary)
    return "\n".join(out) + "\n\n" + EPILOG


def print_overview() -> None:
    """Print ``lev --help`` for this terminal (argparse lays out a very narrow one)."""
    columns = terminal_columns()
    if columns < NARROWEST:
        overview_parser().print_help()
    else:
        sys.stdout.write(overview_text(columns))
