"""``lev validate``, ``lev schema`` and ``lev graph``: checking and showing a blueprint
(docs/blueprint.md#validation-and-lints).

The checks themselves live in :mod:`lev_nb.blueprint`; this module turns their report into the
text and exit status of the command. ``lev validate`` lints under the user's configuration
(:mod:`lev_nb.settings`: read-path grants and the safe-commands opt-in).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from lev_nb.cli.verbosity import is_verbose


def add_validate(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev validate``."""
    p = subparsers.add_parser(
        "validate", help="check a blueprint: parse, validate and lint it",
        description=("Check an agent blueprint: parse it, run the format's checks and every lint, and "
                     "compile each Rhai script it names. Exit 1 on errors (and on warnings with "
                     "--deny-warnings)."),
        epilog="examples:\n  lev validate blueprints/triage\n  lev validate blueprints/triage --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("path", nargs="?", default=".", help="agent folder or its agent.leviath (default: .)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object instead of text (its 'models' key: the model each stage would start on here)")
    p.add_argument("--deny-warnings", action="store_true", help="fail when there are warnings too")
    p.add_argument("--graph", action="store_true", help="also print the stage graph as Mermaid text (not with --json)")
    p.add_argument("--remote", action="store_true",
                   help="also start the MCP servers the blueprint names and check its server__tool names against them")
    p.set_defaults(func=run_validate)


def add_schema(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev schema``."""
    s = subparsers.add_parser(
        "schema", help="print the JSON Schema of the blueprint format",
        description=("Print the JSON Schema of agent.leviath files, for editors and other tools that "
                     "check TOML against a schema."),
    )
    s.set_defaults(func=run_schema)


def add_graph(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev graph``."""
    graph = subparsers.add_parser(
        "graph", help="print the blueprint as a Mermaid flowchart, or draw it as SVG/PNG",
        description=("Print the stage graph of an agent as Mermaid flowchart text (paste it into any "
                     "Mermaid viewer; JupyterLab draws it for `bp` in a cell), or with --svg/--png write "
                     "it as a picture drawn by Graphviz (its `dot` program must be installed)."),
    )
    graph.add_argument("path", nargs="?", default=".", help="agent folder or its agent.leviath (default: .)")
    graph.add_argument("--direction", default=None, choices=["LR", "TB", "RL", "BT"],
                       help="which way the flowchart runs (default: top to bottom, left to right for a small graph)")
    graph.add_argument("--svg", default=None, metavar="FILE", help="write the graph as an SVG picture to FILE")
    graph.add_argument("--png", default=None, metavar="FILE", help="write the graph as a PNG picture to FILE")
    graph.set_defaults(func=run_graph)


def run_schema(args: argparse.Namespace) -> int:
    """Print the JSON Schema generated from the blueprint models."""
    from lev_nb.blueprint.schema import json_schema

    print(json.dumps(json_schema(), indent=2))
    return 0


def run_validate(args: argparse.Namespace) -> int:
    """``lev validate PATH [--json] [--deny-warnings]``; returns the exit status."""
    from lev_nb.blueprint.errors import BlueprintError
    from lev_nb.blueprint.pipeline import refusal
    from lev_nb.catalog import load_argument
    from lev_nb.blueprint.script_tools import scan_tools
    from lev_nb.verdict import models_text, validate_blueprint

    env = None
    try:
        bp = load_argument(args.path)  # a path or an agent's name, never TOML text
    except BlueprintError as exc:
        if exc.kind == "read":
            print(f"Error: {exc.detail}", file=sys.stderr)
            return 1
        report = refusal(exc, args.deny_warnings)
    else:
        env = _lint_env(bp)
        if getattr(args, "remote", False):
            from lev_nb.cli.mcp_commands import with_remote_tools

            env = with_remote_tools(bp, env)
        report = validate_blueprint(bp, deny_warnings=args.deny_warnings, env=env)

    if args.json:
        print(report.to_json())
    elif report.error is None and report.blueprint is not None:
        if is_verbose(args) and env is not None:
            print(_checked_under(report.blueprint, env))
        print(_summary(report, scan_tools(report.blueprint.base_dir)))
        if report.models is not None:
            print(models_text(report.models))
        if report.findings:
            print(report.findings_text())
        if getattr(args, "graph", False):
            print()
            print(report.blueprint.mermaid(), end="")
    failure = report.failure_line()
    if failure:
        print(failure, file=sys.stderr)
        return 1
    return 0


def _checked_under(bp: Any, env: Any) -> str:
    """What ``lev validate -v`` adds: the file checked and what the lints knew of this install."""
    from lev_nb.settings import ConfigError, config_path

    def known(value: bool | None) -> str:
        return "unknown" if value is None else ("yes" if value else "no")

    try:
        where = str(config_path())
    except ConfigError as exc:
        where = f"unreadable ({exc})"
    providers = env.available_providers
    reachable = "unknown" if providers is None else (", ".join(sorted(providers)) or "none")
    return "\n".join([
        f"Checked: {bp.source_path}",
        f"Linted under: {where}",
        f"  providers this blueprint names that are configured here: {reachable}",
        f"  blueprint read paths honoured wholesale: {known(env.read_paths_allow_blueprint)}",
        f"  blueprint safe commands honoured: {known(env.safe_commands_honoured)}",
    ])


def _lint_env(bp: Any) -> Any:
    """The lint environment under the user's configuration (:func:`lev_nb.verdict.install_env`).
    A configuration that cannot be read is not a reason to refuse the lint: its checks take their
    "unknown" forms, and stderr says why."""
    from lev_nb.verdict import install_env, read_settings

    settings, problem = read_settings()
    if problem is not None:
        print(f"lev: warning: {problem}; the checks that depend on your configuration are skipped", file=sys.stderr)
    return install_env(bp, settings)


def run_graph(args: argparse.Namespace) -> int:
    """``lev graph PATH``: the blueprint as Mermaid text, or ``--svg/--png FILE``: as a picture."""
    from lev_nb.blueprint import BlueprintError
    from lev_nb.blueprint.graph import blueprint_mermaid
    from lev_nb.catalog import load_argument

    env = None
    try:
        bp = load_argument(args.path)  # a path or an agent's name, never TOML text
    except BlueprintError as exc:
        print(f"lev graph: {exc}", file=sys.stderr)
        return 1
    pictures = [(fmt, path) for fmt, path in (("svg", args.svg), ("png", args.png)) if path]
    if not pictures:
        sys.stdout.write(blueprint_mermaid(bp, direction=args.direction))
        return 0
    return _write_pictures(bp, pictures, args.direction)


def _write_pictures(bp: Any, pictures: list[tuple[str, str]], direction: str | None) -> int:
    """Draw ``bp`` with Graphviz into each (format, file); one clear line when that cannot be done."""
    from lev_nb.blueprint.picture import GraphvizMissing, render
    from lev_nb.store.files import write_atomic

    for fmt, path in pictures:
        try:
            data = render(bp, fmt, direction=direction)
        except GraphvizMissing as exc:
            print(f"lev graph: {exc}", file=sys.stderr)
            return 1
        try:
            write_atomic(Path(path), data)
        except OSError as exc:
            print(f"lev graph: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        print(f"wrote {path} ({fmt.upper()}, {len(data):,} bytes)", file=sys.stderr)
    return 0


def _verdict(report: Any) -> str:
    """The first line of ``lev validate``: valid, or not and why in counts (the findings follow)."""
    name = report.blueprint.agent.name
    if report.valid:
        return f"✓ Blueprint '{name}' is valid."
    counts = [f"{report.errors} error{'s' if report.errors != 1 else ''}"] if report.errors else []
    if report.deny_warnings and report.warnings:
        counts.append(f"{report.warnings} warning{'s' if report.warnings != 1 else ''} (--deny-warnings)")
    return f"✗ Blueprint '{name}' is not valid: {' and '.join(counts)} below."


def _summary(report: Any, tools: Any) -> str:
    """The text ``lev validate`` prints for a blueprint that loaded: the verdict, stages, inputs,
    mode, script tools (the findings are printed after it)."""
    bp = report.blueprint
    lines = [_verdict(report), f"  {len(bp.stages)} stages, version {bp.agent.version}"]
    if bp.inputs:
        parts = [f"--{i.key}{' (required)' if i.required else ''} -> region '{i.region}'" for i in bp.inputs]
        lines.append(f"  Inputs: {', '.join(parts)}")
    else:
        lines.append("  Inputs: none declared (a task goes into the first pinned region, else the conversation)")
    if bp.is_graph_mode:
        lines.append(f"  Graph mode: entry stage '{bp.entry_stage}'")
        for name, st in bp.stages.items():
            if st.transitions is None:
                info = " (linear)"
            elif not st.transitions:
                info = " (terminal)"
            else:
                info = " → " + ", ".join(st.transitions)
            revisits = f" (max_revisits: {st.max_revisits})" if st.max_revisits is not None else ""
            lines.append(f"  - {name}{info}{revisits}")
    else:
        lines.append("  Linear mode: " + " → ".join(bp.stages))
    if tools.names or tools.skipped:
        lines.append(f"  {len(tools.names)} script tool(s) in tools/")
        for path, reason in tools.skipped:
            lines.append(f"  ⚠ Warning: script tool '{path.name}' skipped: {reason}")
    return "\n".join(lines)
