"""What every ``lev`` subcommand does alike: read which action it was given, load the user's
settings, and stop with one line on stderr and an exit status.

The words stay each command's own; only the form is shared, so that ``lev models``, ``lev policy``,
``lev config`` and the rest fail the same way.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["chosen_action", "fail", "settings_or_none"]


def fail(command: str, message: object, status: int = 1) -> int:
    """Print ``lev COMMAND: MESSAGE`` on stderr; returns ``status`` (the exit status)."""
    print(f"lev {command}: {message}", file=sys.stderr)
    return status


def chosen_action(args: argparse.Namespace, command: str, actions: tuple[str, ...]) -> str | None:
    """The action a ``lev COMMAND ACTION`` was given (argparse's ``dest`` is ``COMMAND_action``), or
    None after saying which ones there are, when none was (the caller exits 2, as argparse does)."""
    action = getattr(args, f"{command}_action", None)
    if action is None:
        choices = ", ".join(actions[:-1]) + f" or {actions[-1]}" if len(actions) > 1 else actions[0]
        print(f"lev {command}: say {choices} (lev {command} --help)", file=sys.stderr)
    return action


def settings_or_none() -> Any:
    """The effective settings, or None after printing why they cannot be read (a bad config.toml,
    environment variable or ``-c`` option; the caller exits 1)."""
    from lev_nb.settings import ConfigError, current

    try:
        return current()
    except ConfigError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return None
