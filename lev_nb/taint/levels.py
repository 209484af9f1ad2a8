"""Sensitivity labels and how each tool is classified for taint tracking (upstream security.md).

A label is one of ``public`` < ``internal`` < ``private``. Every tool has a classification: the
label its results carry (``sensitivity``), which way its data flows (``inbound``, ``internal``,
``outbound``) and, for an outbound tool, the highest label it may carry off the machine
(``clearance``). Only outbound tools are gated. A tool this table does not know (a script tool, an
MCP tool) is treated as outbound with public clearance: third-party code that may reach a
third-party service fails closed.
"""

from __future__ import annotations

from collections.abc import Iterable

from lev_nb.records import record

__all__ = [
    "DIRECTIONS", "LEVELS", "ToolClass", "builtin_class", "highest", "is_level", "rank",
]

LEVELS: tuple[str, ...] = ("public", "internal", "private")
DIRECTIONS: tuple[str, ...] = ("inbound", "internal", "outbound")


def is_level(value: object) -> bool:
    """Whether ``value`` is one of the three labels (lower case, as config files write them)."""
    return isinstance(value, str) and value in LEVELS


def rank(level: str) -> int:
    """The order of ``level`` (public 0, internal 1, private 2)."""
    return LEVELS.index(level)


def highest(levels: Iterable[str], default: str = "public") -> str:
    """The most sensitive of ``levels`` (``default`` when there are none)."""
    best = default
    for level in levels:
        if rank(level) > rank(best):
            best = level
    return best


@record
class ToolClass:
    """How one tool is treated: the label of its results, its direction, its clearance."""

    sensitivity: str = "public"
    direction: str = "outbound"
    clearance: str = "public"

    @property
    def outbound(self) -> bool:
        """Whether the gate checks this tool."""
        return self.direction == "outbound"

    def clears(self, level: str) -> bool:
        """Whether data at ``level`` may go through this tool without a decision."""
        return not self.outbound or rank(level) <= rank(self.clearance)


_INBOUND_INTERNAL = ToolClass("internal", "inbound", "public")
_LOCAL = ToolClass("internal", "internal", "public")
_ENGINE = ToolClass("public", "internal", "public")  # answered by the run itself, nothing leaves
_OUT = ToolClass("public", "outbound", "public")

_TABLE: dict[str, ToolClass] = {
    **dict.fromkeys(("read_file", "read_files", "list_dir"), _INBOUND_INTERNAL),
    **dict.fromkeys(("write_file", "edit_file"), _LOCAL),
    # A web search sends a query the model wrote, so it is a way out as much as a way in.
    **dict.fromkeys(("shell", "bash", "web_search", "web_fetch", "http_get", "http_post", "fetch"), _OUT),
    **dict.fromkeys(("current_time", "locale_info"), ToolClass("public", "inbound", "public")),
    **dict.fromkeys(("system_info", "environment_info", "which_command", "runtime_info"), _INBOUND_INTERNAL),
    **dict.fromkeys(("ask_user_text", "ask_user_choice", "ask_user_confirm", "present_for_review",
                     "edit_document"), _LOCAL),
    **dict.fromkeys(("spawn_agent", "check_agent", "wait_for_agent", "send_to_agent", "kill_agent"), _LOCAL),
    **dict.fromkeys(("submit_output", "fan_out", "context_read", "context_write", "context_append",
                     "context_delete", "context_list", "todo_add", "todo_done", "todo_note"), _ENGINE),
}


def builtin_class(tool: str) -> ToolClass:
    """The built-in classification of ``tool`` (outbound, public clearance, when unknown)."""
    return _TABLE.get(tool, _OUT)
