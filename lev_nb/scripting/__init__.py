"""The script kinds a blueprint can use, built on the hardened engine of :mod:`lev_nb.rhai`
(docs/rhai.md). One module per kind; this package re-exports their public names.

- Tool scripts (:mod:`.tools`, host functions in :mod:`.host`): :func:`parse_tool_script`,
  :func:`discover_tools`, :func:`run_tool`, with host I/O through a :class:`ToolHost`. What a tool
  declares is read by :mod:`lev_nb.blueprint.script_tools`.
- Output validators (:mod:`.validators`): :func:`compile_validator` -> :class:`Validator` whose
  ``check`` gives :class:`Valid`, :class:`Invalid` or :class:`Unusable`.
- Stage hooks (:mod:`.hooks`): :func:`compile_hooks` -> :class:`HookScript` whose ``run`` gives
  :class:`Allow`, :class:`Modify`, :class:`Cancel` or :class:`Retry`.
- Custom context regions (:mod:`.regions`): :func:`compile_region_script` -> :class:`RegionScript`.
- ``lev validate``'s script compile checks and the full ``validate`` (:mod:`.checks`, imported
  on its own; ``lev_nb.validate`` is :func:`lev_nb.verdict.validate`, which adds the install's checks).

Every kind compiles with the same hardened engine it runs on, with its own operation budget
(tools 500k, the others 100k). Scripts come from a file (``path``) or from a string (``source``,
e.g. a notebook cell, named by ``label``). Problems found while compiling raise
:class:`ScriptError` naming the file and line; problems while running are reported as each kind's
contract says (tools return ``[error] ...`` text, validators return ``Unusable``, hooks and
regions raise ``ScriptError``).
"""

from __future__ import annotations

from lev_nb.blueprint.script_tools import CAPABILITIES, ToolParam

from ._common import ScriptError
from .hooks import (
    HOOK_NAMES,
    Allow,
    Cancel,
    HookOutcome,
    HookScript,
    Modify,
    Retry,
    compile_hooks,
)
from .host import HOST_RESULT_LIMIT, DenyAllHost, ToolHost
from .regions import RegionScript, compile_region_script
from .tools import SkippedTool, ToolScript, discover_tools, parse_tool_script, run_tool
from .validators import Invalid, Unusable, Valid, Validator, Verdict, compile_validator

__all__ = [
    "Allow",
    "Cancel",
    "CAPABILITIES",
    "DenyAllHost",
    "HOOK_NAMES",
    "HookOutcome",
    "HookScript",
    "HOST_RESULT_LIMIT",
    "Invalid",
    "Modify",
    "RegionScript",
    "Retry",
    "ScriptError",
    "SkippedTool",
    "ToolHost",
    "ToolParam",
    "ToolScript",
    "Unusable",
    "Valid",
    "Validator",
    "Verdict",
    "compile_hooks",
    "compile_region_script",
    "compile_validator",
    "discover_tools",
    "parse_tool_script",
    "run_tool",
]
