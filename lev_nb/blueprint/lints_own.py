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
- ``wrong-type`` (warning): a key written with a value of the wrong TOML type
  (``max_iterations = "ten"``), or a string list with items that are not strings. The format reads
  such a value as absent (the upstream does the same), so the stage runs as if the key were not
  there; the finding names the key, its line and the type that belongs there.
- ``permission-capped`` (note): a blueprint permission looser than the user's configuration
  allows (``edit_file = "allow"`` against the default ``ask``): runs ask for it, and deny it where
  nobody can be asked, unless the launch allows it.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from lev_nb.schemas import schema_problem

from . import constants as C
from .errors import closest, locate_key
from .report import Finding
from .table import Key, Table

if TYPE_CHECKING:
    from .lints import LintEnv
    from .model import Blueprint, OutputSpec

__all__ = ["OWN_CHECKS", "OWN_CODES", "format_key_typos"]

OWN_CODES: tuple[str, ...] = ("gate-unknown-region", "output-schema-invalid", "output-format-key-typo",
                              "wrong-type", "permission-capped", "tool-unavailable")


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


# Keys with a finding of their own when their value cannot be read (region-seed-not-understood).
_OWN_FINDING = frozenset({"seed"})


def _ignored_values(loaded: Table, raw: dict[str, Any], path: tuple[str, ...]
                    ) -> Iterator[tuple[tuple[str, ...], Any, Key, int]]:
    """(key path, value written, the key, items dropped) for each value of ``raw`` that the loader
    could not use: a value of the wrong type, read as absent (items dropped: 0), or a string list
    some of whose items were not strings. Keys the table does not have are ``unknown-key``'s."""
    fields = type(loaded).model_fields
    by_spelling = {(f.alias or name): (name, f) for name, f in fields.items() if not f.exclude}
    for key, written in raw.items():
        known = by_spelling.get(key)
        if known is None or key in _OWN_FINDING:
            continue
        name, spec = known
        here = path + (key,)
        if name not in loaded.model_fields_set:
            yield here, written, spec, 0
            continue
        value = getattr(loaded, name)
        if isinstance(value, Table):
            if isinstance(written, dict):
                yield from _ignored_values(value, written, here)
            elif not value.model_fields_set:  # a table of defaults stands in for it (not a short form)
                yield here, written, spec, 0
        elif isinstance(value, list) and isinstance(written, list):
            if len(value) < len(written) and all(isinstance(item, str) for item in value):
                yield here, written, spec, len(written) - len(value)
            elif len(value) == len(written):
                for index, (item, item_written) in enumerate(zip(value, written)):
                    if isinstance(item, Table) and isinstance(item_written, dict):
                        yield from _ignored_values(item, item_written, path + (f"{key}[{index}]",))
        elif isinstance(value, dict) and isinstance(written, dict):
            for entry, item in value.items():
                item_written = written.get(entry)
                if isinstance(item, Table) and isinstance(item_written, dict):
                    yield from _ignored_values(item, item_written, here + (str(entry),))


_TOML_TYPES = ((bool, "a boolean"), (int, "a whole number"), (float, "a number"), (str, "a string"),
               (list, "an array"), (dict, "a table"))


def _toml_type(value: Any) -> str:
    """What a TOML value is, in words (a date or a time is neither of the listed kinds)."""
    return next((words for kind, words in _TOML_TYPES if isinstance(value, kind)), "a date or time")


def _expected(hint: Any) -> str:
    """The kind of value a key takes, in words, from its annotation."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(dict.fromkeys(_expected(a) for a in args if a is not type(None)))
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin is list:
        return "an array of strings" if args == (str,) else "an array"
    if origin is dict or isinstance(hint, type) and issubclass(hint, Table):
        return "a table"
    words = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}
    return words.get(hint, "a value of another type")


def wrong_type(bp: Blueprint, env: LintEnv | None = None) -> list[Finding]:
    """A value the format reads as absent because of its type, said where it is written."""
    out = []
    for path, written, spec, dropped in _ignored_values(bp, bp.raw, ()):
        stage = path[1] if len(path) > 2 and path[0] == "stages" else None
        where = ".".join(path)
        found = locate_key(bp.source_text, list(path)) if bp.source_text else None
        at = f" (line {found[0]})" if found else ""
        if dropped:
            items = f"{dropped} items that are not strings" if dropped > 1 else "an item that is not a string"
            message = f"{where}{at} has {items}, which the format drops"
            fix = "write each item as a quoted string"
        else:
            message = (f"{where}{at} is {_toml_type(written)}, but it takes {_expected(spec.annotation)}, "
                       "so the value is ignored and the key reads as not set")
            fix = f"write {path[-1]} as {_expected(spec.annotation)}, or remove it"
        out.append(Finding("wrong-type", "warning", message, stage, fix))
    return out


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


OWN_CHECKS: list[Any] = [gate_unknown_region, output_schema_invalid, output_format_key_typo, wrong_type,
                         permission_capped, tool_unavailable]
