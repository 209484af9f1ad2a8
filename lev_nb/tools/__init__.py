"""Built-in tools, permission policies and the batch executor (paths are confined by :mod:`lev_nb.workspace`)."""

from __future__ import annotations

from lev_nb.tools.builtin import READ_FILE_CAP, SHELL_STREAM_CAP, builtin_tools, default_registry
from lev_nb.tools.context import DEFAULT_SHELL_TIMEOUT_S, ContextAccess, ToolContext
from lev_nb.tools.executor import FAILURE_PREFIXES, ToolResult, execute_calls, is_failure, is_inline
from lev_nb.tools.policy import Policies, authorise, resolve_policy
from lev_nb.tools.registry import ALIASES, MODIFYING_TOOLS, ToolDef, ToolRegistry
from lev_nb.tools.validation import validate_arguments

__all__ = [
    "ALIASES",
    "DEFAULT_SHELL_TIMEOUT_S",
    "FAILURE_PREFIXES",
    "MODIFYING_TOOLS",
    "READ_FILE_CAP",
    "SHELL_STREAM_CAP",
    "ContextAccess",
    "Policies",
    "ToolContext",
    "ToolDef",
    "ToolRegistry",
    "ToolResult",
    "authorise",
    "builtin_tools",
    "default_registry",
    "execute_calls",
    "is_failure",
    "is_inline",
    "resolve_policy",
    "validate_arguments",
]
