"""Noticing a stage that goes round in circles with its tools (docs/concepts.md#watchdogs).

Two signals, each a nudge rather than a stop: the same tool called with the same arguments
``max_repeat_calls`` times, and ``max_readonly_streak`` read-only calls in a row. A productive call
(one that changes files or context, or runs a command) resets both.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import field

from lev_nb.engine.plan.types import RepetitionPolicy
from lev_nb.records import record
from lev_nb.text import sorted_json

PRODUCTIVE_TOOLS = frozenset(
    {"write_file", "edit_file", "bash", "shell", "run_command", "execute",
     "context_write", "context_append", "context_delete"}
)


@record(frozen=False)
class RepetitionWatch:
    """Per-stage counters; :meth:`observe` returns the nudges one tool call earns."""

    policy: RepetitionPolicy
    repeats: Counter[str] = field(default_factory=Counter)
    readonly_streak: int = 0

    def observe(self, tool: str, arguments: dict) -> list[str]:
        """Count one call (canonical tool name) and say what, if anything, to tell the model."""
        if not self.policy.enabled:
            return []
        if tool in PRODUCTIVE_TOOLS:
            self.repeats.clear()
            self.readonly_streak = 0
            return []
        nudges = []
        key = tool + "\0" + sorted_json(arguments)
        self.repeats[key] += 1
        count = self.repeats[key]
        if self.policy.max_repeat_calls and count >= self.policy.max_repeat_calls:
            nudges.append(
                f"You have called {tool} with the same arguments {count} times. That looks like a "
                "loop: the answer will not change. Use what you already have, or try something else."
            )
        self.readonly_streak += 1
        if self.policy.max_readonly_streak and self.readonly_streak >= self.policy.max_readonly_streak:
            nudges.append(
                f"You have made {self.readonly_streak} read-only tool calls in a row without changing "
                "anything. Decide what you know enough to do, and do it."
            )
            self.readonly_streak = 0
        return nudges
