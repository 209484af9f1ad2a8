"""MkDocs hook: the reference pages generated from the code at build time.

``reference/blueprint.md`` is read off the blueprint's tables (lev_nb.blueprint.model) and
the key descriptions beside them (lev_nb.blueprint.keydocs); ``reference/configuration.md`` off the
typed settings (lev_nb.settings.schema); ``reference/cli.md`` off the ``lev`` argument parsers
(lev_nb.cli.build_parser). A key, type, default or option added to the code appears in the site at
the next build, so the reference cannot drift from what the program reads.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:  # the checkout's lev_nb, whether or not it is installed
    sys.path.insert(0, str(_ROOT))

GENERATED = ("reference/blueprint.md", "reference/configuration.md", "reference/cli.md")


def on_files(files: Files, config: Any) -> Files:
    """Add the generated reference pages to the site."""
    pages = {
        "reference/blueprint.md": blueprint_reference(),
        "reference/configuration.md": configuration_reference(),
        "reference/cli.md": cli_reference(),
    }
    for uri, text in pages.items():
        files.append(File.generated(config, uri, content=text))
    return files


# ------------------------------------------------------------------------------------------------
# Shared
# ------------------------------------------------------------------------------------------------
def _cell(text: str) -> str:
    """Text that is safe inside one Markdown table cell: one line, ``|`` escaped, and ``<`` outside
    code spans escaped so that ``--<input>`` or ``[agent_read_paths.<name>]`` is not read as HTML."""
    parts = " ".join(str(text).split()).replace("``", "`").split("`")
    for i in range(0, len(parts), 2):  # the even parts are outside code spans
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts).replace("|", "\\|")


# Sphinx roles (``:class:`X```) that docstrings use; in the site the code span alone reads right.
_ROLE = re.compile(r":(?:attr|class|func|meth|mod|data|exc|obj|py:\w+):(?=<code)")


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """Drop the Sphinx role prefixes mkdocstrings leaves in front of code spans, and the ``~`` that
    asks Sphinx to show a dotted name short."""
    return _ROLE.sub("", html).replace("<code>~", "<code>")


def _code(value: str) -> str:
    return f"`{value}`" if value else ""


def _toml_value(value: Any) -> str:
    """A default as it would be written in TOML."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, (int, float)):
        return f"`{value}`"
    if isinstance(value, str):
        return f"`{json.dumps(value)}`" if len(value) < 60 else "(a built-in text)"
    if isinstance(value, (list, tuple)):
        if not value:
            return "`[]`"
        return "`" + json.dumps(list(value))[:80] + "`"
    if isinstance(value, dict) or hasattr(value, "items"):
        return "`{}`" if not dict(value) else "`" + json.dumps(dict(value))[:80] + "`"
    return ""


def _first_paragraph(doc: str | None) -> str:
    if not doc:
        return ""
    return " ".join(doc.strip().split("\n\n")[0].split())


# ------------------------------------------------------------------------------------------------
# The blueprint format
# ------------------------------------------------------------------------------------------------
def blueprint_reference() -> str:
    """Every table and key of ``agent.leviath``, from the blueprint's tables."""
    from lev_nb.blueprint import keydocs
    from lev_nb.blueprint import model as M
    from lev_nb.blueprint.table import Table

    # The TOML path of each table model, in the order a reader meets them.
    paths: list[tuple[str, type[Table]]] = [
        ("[agent]", M.AgentInfo),
        ("[agent.nudge], [stages.<name>.nudge]", M.Nudge),
        ("[agent.output], [stages.<name>.output]", M.OutputSpec),
        ("[stages.<name>]", M.Stage),
        ("[stages.<name>.model]", M.ModelSpec),
        ("[[stages.<name>.model.models]]", M.ModelRef),
        ("[stages.<name>.hooks]", M.Hooks),
        ("[stages.<name>.tool_routing]", M.ToolRouting),
        ("[stages.<name>.tool_routing.overrides.<tool>]", M.RoutingOverride),
        ("[[stages.<name>.interaction_points]]", M.InteractionPoint),
        ("[stages.<name>.context]", M.StageContext),
        ("[stages.<name>.transitions.<target>]", M.Edge),
        ("[stages.<name>.transitions.<target>.gate]", M.Gate),
        ("[stages.<name>.transitions.<target>.transform_config]", M.TransformConfig),
        ("[context]", M.ContextConfig),
        ("[context.regions.<name>]", M.Region),
        ("seed (of a region)", M.Seed),
        ("[context.file_tracking]", M.FileTracking),
        ("[sandbox], [stages.<name>.sandbox]", M.Sandbox),
        ("[security], [stages.<name>.security]", M.Security),
        ("[read_paths]", M.ReadPaths),
        ("[safe_commands]", M.SafeCommands),
        ("[compaction]", M.Compaction),
        ("[repetition_detection]", M.RepetitionDetection),
        ("[[transforms]]", M.TransformSpec),
        ("[[transforms.mappings]]", M.RegionMapping),
    ]
    anchors = {cls: "bp-" + cls.__name__.lower() for _, cls in paths}
    lines = [
        "# Blueprint format reference",
        "",
        "Every table and key `agent.leviath` may hold, generated from lev_nb's own model of the",
        "format (`lev_nb/blueprint/model.py`) each time this site is built. The",
        "[blueprint guide](../blueprint.md) explains how the pieces fit together;",
        "`lev schema` prints the same format as a JSON Schema.",
        "",
        "A **strict** table refuses a key it does not know (the error names the file, line and key);",
        "a **lenient** one keeps it and `lev validate` warns (`unknown-key`, with a \"did you mean\").",
        "An empty default means the key is unset unless you write it.",
        "",
    ]
    lines.append("| Table | |")
    lines.append("|---|---|")
    for path, cls in paths:
        lines.append(f"| [`{path}`](#{anchors[cls]}) | {_cell(_first_paragraph(cls.__doc__))} |")
    lines.append("")
    for path, cls in paths:
        strict = cls.model_config.get("extra") == "forbid"
        lines += [f"## `{path}` {{#{anchors[cls]}}}", ""]
        doc = _cell(_first_paragraph(cls.__doc__))
        if doc:
            lines += [doc, ""]
        lines += [f"*{'Strict' if strict else 'Lenient'} table.*", ""]
        lines += ["| Key | Type | Default | Description |", "|---|---|---|---|"]
        own = keydocs.KEY_DOCS.get(cls.__name__, {})
        for name, info in cls.model_fields.items():
            if info.exclude:
                continue
            key = info.alias or name
            kind = _key_type(info.annotation, anchors)
            default = _key_default(info)
            text = info.description or own.get(name, "")
            lines.append(f"| `{key}` | {kind} | {default} | {_cell(text)} |")
        lines.append("")
    lines += _lint_codes()
    return "\n".join(lines)


def _lint_codes() -> list[str]:
    """The codes ``lev validate`` reports, from the lint catalogue."""
    from lev_nb.blueprint.lints import ALL_CODES

    split = ALL_CODES.index("unknown-key")
    upstream = ", ".join(f"`{c}`" for c in ALL_CODES[:split])
    own = ", ".join(f"`{c}`" for c in ALL_CODES[split:])
    return [
        "## Lint codes {#lint-codes}",
        "",
        "The findings `lev validate` can report, from its lint catalogue (`lev_nb/blueprint/lints.py`).",
        "Each finding names its code, severity, stage and a fix.",
        "",
        f"**The upstream runtime's codes** (same names and severities): {upstream}.",
        "",
        f"**lev_nb's own**: {own}.",
        "",
    ]


def _key_type(hint: Any, anchors: dict[type, str]) -> str:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        kept = [a for a in args if a is not type(None)]
        return " or ".join(_key_type(a, anchors) for a in kept)
    if origin is typing.Literal:
        return " \\| ".join(f"`{json.dumps(a)}`" for a in args)
    if origin is list:
        return f"array of {_key_type(args[0], anchors)}"
    if origin is dict:
        return f"table of {_key_type(args[1], anchors)}"
    if hint in anchors:
        return f"[table](#{anchors[hint]})"
    names = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if hint in names:
        return names[hint]
    if hint is Any:
        return "any"
    return _cell(getattr(hint, "__name__", str(hint)))


def _key_default(info: Any) -> str:
    from lev_nb.blueprint.table import Table

    if info.is_required():
        return "required"
    if info.default_factory is not None:
        try:
            value = info.default_factory()
        except TypeError:
            return ""
        if isinstance(value, Table):
            return ""
        if isinstance(value, list) and value and hasattr(value[0], "model_dump"):
            return _code(json.dumps([v.model_dump(exclude_none=True) for v in value]))
        return _toml_value(value)
    return _toml_value(info.default)


# ------------------------------------------------------------------------------------------------
# config.toml
# ------------------------------------------------------------------------------------------------
def configuration_reference() -> str:
    """Every key of ``config.toml``, from the typed settings."""
    from lev_nb.settings.schema import SCHEMA, MapOf, Table, Value

    lines = [
        "# Configuration reference",
        "",
        "Every key `config.toml` accepts, generated from lev_nb's typed settings",
        "(`lev_nb/settings/model.py`) each time this site is built. The",
        "[configuration guide](../configuration.md) says where the file lives and which value wins;",
        "`lev config` prints the effective value of each key and where it came from.",
        "",
        "A name in angle brackets (`<agent>`, `<provider>`, `<tool>`) is yours to choose. The",
        "*Environment* column names the variable that overrides the file.",
        "",
    ]
    sections: list[tuple[str, str, list[str]]] = []

    def rows_for(node: Table, prefix: str, title: str, doc: str) -> None:
        rows: list[str] = []
        sections.append((title, doc, rows))  # the table before the tables inside it
        docs = {f.name: f.metadata.get("doc", "") for f in dataclasses.fields(node.cls)}
        for name, child in node.fields.items():
            path = f"{prefix}.{name}" if prefix else name
            if isinstance(child, Value):
                rows.append(_value_row(name, child))
            elif isinstance(child, Table):
                rows_for(child, path, f"[{path}]", _first_paragraph(child.cls.__doc__))
            elif isinstance(child, MapOf):
                item, key = child.item, child.key
                if isinstance(item, Value):
                    rows.append(_value_row(f"{name}.<{key}>", item, docs.get(name, "")))
                elif isinstance(item, Table):
                    rows_for(item, f"{path}.<{key}>", f"[{path}.<{key}>]", _first_paragraph(item.cls.__doc__))
                elif isinstance(item, MapOf) and isinstance(item.item, Value):
                    inner = "tool" if item.key == key else item.key
                    sections.append((f"[{path}.<{key}>]", docs.get(name, ""),
                                     [_value_row(f"<{inner}>", item.item)]))

    rows_for(SCHEMA, "", "Top-level keys", "")
    for title, doc, rows in sections:
        if not rows:
            continue
        heading = title if title == "Top-level keys" else f"`{title}`"
        lines += [f"## {heading}", ""]
        if doc:
            lines += [_cell(doc), ""]
        lines += ["| Key | Type | Default | Environment | Description |", "|---|---|---|---|---|"]
        lines += rows
        lines.append("")
    return "\n".join(lines)


def _value_row(key: str, value: Any, doc: str = "") -> str:
    kinds = {
        "str": "string", "int": "integer", "float": "number", "bool": "boolean",
        "str_list": "array of strings", "policy": '`"allow"` \\| `"ask"` \\| `"deny"`',
        "script_permission": '`"allow"` \\| `"deny"` \\| `"inherit"`', "table": "table",
        "mcp_servers": "array of tables",
    }
    kind = kinds.get(value.type, value.type)
    if value.minimum is not None:
        kind += f" ≥ {value.minimum}"
    return (f"| `{key}` | {kind} | {_toml_value(value.default)} | {_code(value.env or '')} "
            f"| {_cell(value.doc or doc)} |")


# ------------------------------------------------------------------------------------------------
# The lev command
# ------------------------------------------------------------------------------------------------
def cli_reference() -> str:
    """Every ``lev`` command and option, from the argument parsers."""
    from lev_nb.cli import build_parser

    parser = build_parser()
    lines = [
        "# Command-line reference",
        "",
        "Every `lev` command and option, generated from the command's own argument parsers each time",
        "this site is built (`lev COMMAND --help` prints the same). The [CLI guide](../cli.md) shows the",
        "commands at work.",
        "",
        "## `lev`",
        "",
        _cell(parser.description or ""),
        "",
    ]
    lines += _options_table(parser)
    lines += ["```text", (parser.epilog or "").strip(), "```", ""]
    for name, sub in _subcommands(parser):
        lines += _command_section(f"lev {name}", sub, level=2)
    return "\n".join(lines)


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    out: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) in seen:  # an alias of a command already listed
                    continue
                seen.add(id(sub))
                out.append((name, sub))
    return out


def _command_section(title: str, parser: argparse.ArgumentParser, level: int) -> list[str]:
    anchor = title.replace(" ", "-")
    lines = [f"{'#' * level} `{title}` {{#{anchor}}}", ""]
    if parser.description:
        lines += [_cell(parser.description), ""]
    usage = parser.format_usage().replace("usage: ", "", 1).strip()
    lines += ["```text", usage, "```", ""]
    lines += _options_table(parser)
    if parser.epilog:
        lines += ["```text", parser.epilog.strip(), "```", ""]
    for name, sub in _subcommands(parser):
        lines += _command_section(f"{title} {name}", sub, level=min(level + 1, 4))
    return lines


def _options_table(parser: argparse.ArgumentParser) -> list[str]:
    rows: list[str] = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            metavar = ""
            if action.nargs != 0:
                metavar = " " + (action.metavar if isinstance(action.metavar, str) else action.dest.upper())
            name = ", ".join(f"`{o}{metavar}`" for o in action.option_strings)
        else:
            name = f"`{action.metavar or action.dest}`"
        help_text = (action.help or "").replace("%(default)s", str(action.default))
        help_text = help_text.replace("%%", "%")
        if action.choices and not isinstance(action.choices, dict):
            help_text += " (one of: " + ", ".join(str(c) for c in action.choices) + ")"
        rows.append(f"| {name} | {_cell(help_text)} |")
    if not rows:
        return []
    return ["| Argument | Meaning |", "|---|---|", *rows, ""]
