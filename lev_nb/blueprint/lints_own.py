"""lev_nb's own lint codes for what cannot work as written (beyond the upstream catalogue of
docs/blueprint.md#validation-and-lints, which :mod:`lev_nb.blueprint.lints` holds), and the note for
a permission the user's configuration caps.

- ``gate-unknown-region`` (error): a gate's ``require_regions`` names a region no layout declares.
  The upstream does not check this list, and at run time a region that does not
  exist is skipped, so the requirement silently checks nothing (most often a misspelling).
- ``output-schema-invalid`` (error): an output ``schema`` that is not a valid JSON Schema, with
  the path inside the schema (``properties.n.type``). At run time the schema would be skipped and
  every answer accepted unchecked.
- ``output-format-key-typo`` (error): an output table with a schema whose ``format`` key is
  misspelt (``fromat = "json"``): the format nobody reads is not checked. (Any other unknown key
  is ``unknown-key``'s, a warning.)
- ``tool-unavailable`` (warning): a stage lists a script tool whose ``@requires`` this machine
  cannot meet (``search`` without a readable search key): runs do not offer it, and say so.
- ``permission-capped`` (note): a blueprint permission looser than the user's configuration
  allows (``edit_file = "allow"`` against the default ``ask``): runs ask for it, and deny it where
  nobody can be asked, unless the launch allows it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from lev_nb.schemas import schema_problem

from . import constants as C
from .errors import closest
from .report import Finding

if TYPE_CHECKING:
    from .lints import LintEnv
    from .model import Blueprint, OutputSpec

__all__ = ["OWN_CHECKS", "OWN_CODES", "format_key_typos"]

OWN_CODES: tuple[str, ...] = ("gate-unknown-region", "output-schema-invalid", "output-format-key-typo",
                              "permission-capped", "tool-unavailable")


def gate_unknown_region(bp: Blueprint, env: LintEnv) -> list[Finding]:
    """Each ``require_regions`` entry of a gate must name a declared region."""
    known = bp.known_regions
    out = []
    for name, st in bp.stages.items():
        for target, edge in (st.transitions or {}).items():
            gate = edge.gate
            for region in gate.require_regions if gate is not None else []:
                if region in known:
                    continue
                close = closest(region, sorted(known))
                fix = (f"did you mean '{close}'?" if close
                       else f"declare the region under [context.regions], or name one of: {', '.join(sorted(known))}")
                out.append(Finding(
                    "gate-unknown-region", "error",
                    f"transition to '{target}': gate.require_regions names region '{region}', which no stage "
                    "declares, so the gate never checks it (a region that does not exist is skipped at run time)",
                    name, fix,
                ))
    return out


def _outputs(bp: Blueprint) -> Iterator[tuple[str | None, str, OutputSpec]]:
    """(stage or None, the table's TOML path, the spec) of every output table."""
    if bp.agent.output is not None:
        yield None, "agent.output", bp.agent.output
    for name, st in bp.stages.items():
        if st.output is not None:
            yield name, f"stages.{name}.output", st.output


def output_schema_invalid(bp: Blueprint, env: LintEnv) -> list[Finding]:
    """An output schema must be a valid JSON Schema (where it is not, say where inside it)."""
    out = []
    for stage, where, spec in _outputs(bp):
        if spec.json_schema is None:
            continue
        problem = schema_problem(spec.json_schema)
        if problem is not None:
            out.append(Finding(
                "output-schema-invalid", "error",
                f"{where}.schema is not a valid JSON Schema: {problem}; answers would be accepted unchecked",
                stage, "fix the schema where the message points; until then the schema checks nothing",
            ))
    return out


def format_key_typos(bp: Blueprint) -> list[tuple[str | None, str, str]]:
    """(stage or None, table path, key) for each key of an output table with a schema that is a
    misspelling of ``format``."""
    found = []
    for stage, where, spec in _outputs(bp):
        if spec.json_schema is None:
            continue
        for key in spec.model_extra or {}:
            if key != "format" and closest(key, ["format"]):
                found.append((stage, where, key))
    return found


def output_format_key_typo(bp: Blueprint, env: LintEnv) -> list[Finding]:
    """A misspelt ``format`` key next to a schema."""
    return [
        Finding("output-format-key-typo", "error",
                f"[{where}] has the key '{key}', a misspelling of 'format', so the answer's format is not set "
                "or checked", stage, f"write format = ... instead of {key} = ...")
        for stage, where, key in format_key_typos(bp)
    ]


def _permissions(bp: Blueprint) -> Iterator[tuple[str | None, str, str, str]]:
    """(stage or None, table path, tool, policy) of every permission the blueprint sets."""
    for tool, policy in bp.tool_permissions.items():
        yield None, "tool_permissions", tool, policy
    for name, st in bp.stages.items():
        for tool, policy in st.tool_permissions.items():
            yield name, f"stages.{name}.tool_permissions", tool, policy


def permission_capped(bp: Blueprint, env: LintEnv) -> list[Finding]:
    """A permission the configuration holds to something stricter (only when it is known)."""
    ceiling = env.permission_ceiling
    if ceiling is None:
        return []
    out = []
    for stage, where, tool, policy in _permissions(bp):
        declared = str(policy).lower()
        cap = ceiling(tool)
        if declared not in C.POLICIES or cap is None or C.POLICIES.index(declared) >= C.POLICIES.index(cap):
            continue
        unattended = " (and denies it where nobody can be asked)" if cap == "ask" else ""
        out.append(Finding(
            "permission-capped", "note",
            f"[{where}] {tool} = \"{declared}\" is held to \"{cap}\" by your configuration, so a run "
            f"{'asks before running' if cap == 'ask' else 'never runs'} {tool}{unattended}",
            stage,
            f"start the run with --allow {tool}, set [tool_permissions] {tool} = \"{declared}\" in config.toml, "
            "or set [security] allow_blueprint_permissions = true",
        ))
    return out


def tool_unavailable(bp: Blueprint, env: LintEnv) -> list[Finding]:
    """A stage lists a script tool this machine cannot offer (only when the configuration is known)."""
    out = []
    for name, st in bp.stages.items():
        for tool in st.available_tools:
            why = env.unavailable_tools.get(tool)
            if why is not None:
                out.append(Finding(
                    "tool-unavailable", "warning",
                    f"available_tools lists '{tool}', which this machine cannot offer ({why}), so runs here "
                    "go without it", name, why.split(": ", 1)[-1]))
    return out


def default_policy(tool: str) -> str | None:
    """The policy of a built-in tool when no table sets one (None: not a built-in tool)."""
    canon = C.canon_tool(tool.lower())
    if canon in C.ASK_BY_DEFAULT:
        return "ask"
    return "allow" if canon in C.BUILTIN_TOOLS else None


OWN_CHECKS: list[Any] = [gate_unknown_region, output_schema_invalid, output_format_key_typo, permission_capped,
                         tool_unavailable]
