"""The ``lev validate`` and ``lev schema`` subcommands (registered by :mod:`lev_nb.cli`)."""

from __future__ import annotations

import argparse
import json
import sys

from .errors import BlueprintError


def add_commands(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``validate`` and ``schema`` on the ``lev`` parser."""
    p = subparsers.add_parser("validate", help="check a blueprint: parse, validate and lint it",
                              description="Check an agent blueprint (exit 1 on errors).")
    p.add_argument("path", nargs="?", default=".", help="agent folder or its agent.leviath (default: .)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--deny-warnings", action="store_true", help="fail when there are warnings too")
    p.add_argument("--graph", action="store_true", help="also print the stage graph as Mermaid text (not with --json)")
    p.set_defaults(func=run_validate)
    s = subparsers.add_parser("schema", help="print the JSON Schema of the blueprint format")
    s.set_defaults(func=run_schema)


def run_schema(args: argparse.Namespace) -> int:
    """Print the JSON Schema generated from the blueprint models."""
    from .schema import json_schema

    print(json.dumps(json_schema(), indent=2))
    return 0


def run_validate(args: argparse.Namespace) -> int:
    """``lev validate PATH [--json] [--deny-warnings]``; returns the exit status (§8)."""
    from lev_nb.scripting.checks import validate_blueprint

    from .loader import load, resolve_manifest
    from .pipeline import refusal as _refused
    from .script_tools import scan_tools

    manifest = resolve_manifest(args.path)
    try:
        bp = load(manifest)
    except BlueprintError as exc:
        if exc.kind == "read":
            print(f"Error: {exc.message}", file=sys.stderr)
            return 1
        report = _refused(exc, args.deny_warnings)
    else:
        report = validate_blueprint(bp, deny_warnings=args.deny_warnings)

    if args.json:
        print(report.to_json())
    elif report.error is None and report.blueprint is not None:
        print(_summary(report.blueprint, scan_tools(report.blueprint.base_dir)))
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


def _summary(bp, tools) -> str:  # type: ignore[no-untyped-def]
    lines = [f"✓ Blueprint '{bp.agent.name}' is valid.", f"  {len(bp.stages)} stages, version {bp.agent.version}"]
    if bp.inputs:
        parts = [f"--{i.key}{' (required)' if i.required else ''} -> region '{i.region}'" for i in bp.inputs]
        lines.append(f"  Inputs: {', '.join(parts)}")
    else:
        lines.append("  Inputs: none (the task is not written into any region)")
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
