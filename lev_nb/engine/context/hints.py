"""The system blocks lev_nb writes into a stage's prompt on its own: the batch hint and the shell
hint (upstream ``configuration.md`` "System-prompt hints", ``tools.md`` "Which shell you get").

Each is switched by ``batch_tool_hint`` / ``shell_hint``: the stage's word, else the agent's
(resolved into :class:`~lev_nb.engine.plan.types.StagePlan`), else ``config.toml``'s top-level key;
all default on. The blocks read the same on every stage and run of a machine, so they lead the
system prompt in the longest-lived cache tier and cost nothing after the first call.

The shell hint speaks only where the platform's shell is not the POSIX shell a model assumes
(the upstream's case is Windows' ``cmd.exe``). lev_nb runs commands through ``sh``, ``bash`` or
``zsh`` on every platform it supports, so the shell hint is honoured and silent, as the
upstream's is on Linux and macOS.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from lev_nb.messages import SystemBlock

__all__ = ["BATCH_TOOL_HINT", "hint_blocks", "hints_enabled", "shell_guidance"]

BATCH_TOOL_HINT = (
    "One response may carry several tool calls, and lev_nb runs the calls of one response "
    "side by side. When calls do not depend on each other - several searches or fetches, reading "
    "or writing different files, a write followed by a command that does not need to see it - put "
    "them in the same response: each extra round trip costs a whole model turn, while a batch of "
    "eight fetches takes about as long as one. Keep calls apart when one needs another's result, "
    "or when you have to read a command's output before choosing what to do next."
)


_BATCH_BLOCK = SystemBlock(BATCH_TOOL_HINT, "", "stable", 0)  # a record: one for every request


def shell_guidance(platform: str) -> str | None:
    """What a model must be told about the shell on ``platform`` (a ``sys.platform`` value), or
    None where the shell is the POSIX one it assumes - every platform lev_nb runs commands on."""
    del platform  # no supported platform needs it; the argument keeps the upstream's seam
    return None


def hints_enabled(stage: Any, settings: Any) -> tuple[bool, bool]:
    """``(batch_tool_hint, shell_hint)`` for ``stage``: its own or its agent's word, else the
    configuration's."""
    batch = stage.batch_tool_hint if stage.batch_tool_hint is not None else settings.batch_tool_hint
    shell = stage.shell_hint if stage.shell_hint is not None else settings.shell_hint
    return bool(batch), bool(shell)


def hint_blocks(stage: Any, settings: Any, offered: Iterable[str], platform: str = sys.platform) -> list[SystemBlock]:
    """The hint blocks that lead ``stage``'s system prompt, batch hint first; ``offered`` is the
    names of the tools the stage advertises (the shell hint needs ``shell`` among them), read only
    when the platform has shell guidance to give (so a caller may pass a lazy iterable)."""
    batch, shell = hints_enabled(stage, settings)
    blocks: list[SystemBlock] = []
    if batch:
        blocks.append(_BATCH_BLOCK)
    guidance = shell_guidance(platform) if shell else None
    if guidance is not None and "shell" in offered:
        blocks.append(SystemBlock(guidance, "", "stable", 0))
    return blocks
