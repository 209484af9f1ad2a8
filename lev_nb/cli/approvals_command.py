"""``lev approvals safe``: what runs without an approval prompt, and which file put it there
(upstream ``cli.md`` "lev approvals safe", ``interaction.md`` "What runs without asking").

It reads the configuration only: the built-in read-only list, ``[safe_commands]`` and, with
``--agent``, that agent's ``[agent_safe_commands.<name>]``. A blueprint's own ``[safe_commands]``
depends on the blueprint, so ``lev validate`` reports it. Grants made at a prompt live and die with
their run, so there is nothing else to list or clear.
"""

from __future__ import annotations

import argparse
import json

# The layer names as the upstream prints them (the JSON carries the upstream's machine names).
_LABELS = {"default": "built-in", "config": "[safe_commands]", "agent": "[agent_safe_commands]"}


def add_approvals(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev approvals`` and its one subcommand, ``safe``."""
    p = subparsers.add_parser(
        "approvals", help="what runs without an approval prompt (lev approvals safe)",
        description="What a run may do without asking, from this machine's configuration.",
    )
    commands = p.add_subparsers(dest="approvals_command", metavar="COMMAND", required=True, help="safe")
    safe = commands.add_parser(
        "safe", help="list the tools and shell commands that run without an approval prompt, and where each is set",
        description=("List the tools and shell commands that run without an approval prompt, and the file and "
                     "line that put each there: the built-in read-only commands ([safe_commands] defaults), "
                     "[safe_commands] and, with --agent, [agent_safe_commands.NAME]. A blueprint's own "
                     "[safe_commands] counts only where you allow it; lev validate reports it."),
    )
    safe.add_argument("--agent", metavar="NAME", help="include that agent's [agent_safe_commands.NAME] entries")
    safe.add_argument("--json", action="store_true", help="print a JSON list of {key, source, origin}")
    safe.set_defaults(func=run_safe)


def run_safe(args: argparse.Namespace) -> int:
    """Print the safe commands in effect (text, or JSON with ``--json``)."""
    from lev_nb.settings import current
    from lev_nb.settings.model import SHELL_KEY

    settings = current()
    keys = settings.safe_command_origins(args.agent or "")
    rows = sorted(keys.items())
    if args.json:
        print(json.dumps([{"key": key, "source": layer, "origin": str(where)} for key, (layer, where) in rows],
                         indent=2))
        return 0
    if not rows:
        print("nothing runs without a prompt: [safe_commands] defaults is off and nothing else is listed")
        return 0
    width = max(len(key.removeprefix(SHELL_KEY)) for key, _ in rows)
    print("These run without an approval prompt:\n")
    for key, (layer, where) in rows:
        kind = "shell" if key.startswith(SHELL_KEY) else "tool"
        place = "" if where.kind == "default" else f"  ({where})"
        print(f"  {kind:<6} {key.removeprefix(SHELL_KEY):<{width}}  {_LABELS[layer]}{place}")
    if args.agent and settings.safe_commands_honoured(args.agent):
        print(f"\n{args.agent}'s own [safe_commands] block counts too (lev validate {args.agent} lists it).")
    print("\nA shell entry covers the program it names with any arguments: `cat` covers `cat notes.md`.\n"
          "A line that also runs something else still asks: `cat notes.md && curl example.com` is not covered.")
    return 0
