"""``lev list``, ``lev add``, ``lev remove``, ``lev create`` and ``lev pack``: agents by name and
packages of agents (upstream ``packaging.md``; the work is :mod:`lev_nb.catalog`, the words are here)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lev_nb.cli.dispatch import fail

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
FILTERS = ("all", "agents", "blueprints")


def add_list(subparsers: SubParsers) -> None:
    """Register ``lev list``."""
    p = subparsers.add_parser(
        "list", help="the agents you can run by name",
        description=("List the agents `lev run NAME` can find: installed ones ($LEV_HOME/agents, what `lev add` "
                     "installs), an agent.leviath in this folder, the configuration's agent_paths, and the "
                     "agents bundled with lev_nb. The first one of a name is the one that runs."),
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("-f", "--filter", default="all", metavar="WHICH",
                   help="all (default), agents (installed, local and configured) or blueprints (bundled)")
    p.set_defaults(func=run_list)


def add_add(subparsers: SubParsers) -> None:
    """Register ``lev add``."""
    p = subparsers.add_parser(
        "add", help="install an agent folder or a .leviath-bundle",
        description=("Install an agent into $LEV_HOME/agents under its [agent] name, replacing one of that "
                     "name, and print what it asks for (pre-approved tools, scripts, commands it runs at "
                     "start, paths outside its workdir) so you can look before running it. Never downloads."),
    )
    p.add_argument("package", metavar="PACKAGE", help="an agent folder or a .leviath-bundle file")
    p.set_defaults(func=run_add)


def add_remove(subparsers: SubParsers) -> None:
    """Register ``lev remove``."""
    p = subparsers.add_parser("remove", help="uninstall an agent", description="Remove an agent that `lev add` installed.")
    p.add_argument("name", metavar="NAME", help="the installed agent's name (as `lev list` shows it)")
    p.set_defaults(func=run_remove)


def add_create(subparsers: SubParsers) -> None:
    """Register ``lev create`` (the template names are written out: importing the catalog here would
    slow down ``lev --help``; an unknown one is refused with a "did you mean" when it runs)."""
    p = subparsers.add_parser(
        "create", help="start a new agent from a template",
        description=("Write a new agent folder NAME with an agent.leviath that validates and runs (try it "
                     "with --model mock), a .gitignore and a .env.example."),
    )
    p.add_argument("name", metavar="NAME", help="the agent's name and folder")
    p.add_argument("-t", "--template", default="default",
                   help="default (one stage) or coder (plan, implement, review, report); default: default")
    p.set_defaults(func=run_create)


def add_pack(subparsers: SubParsers) -> None:
    """Register ``lev pack``."""
    p = subparsers.add_parser(
        "pack", help="bundle an agent into a .leviath-bundle",
        description=("Bundle an agent folder into one .leviath-bundle file (a gzip tarball, the upstream's "
                     "format) to share: `lev add FILE` installs it. Files that hold credentials (.env*, "
                     "*.key, *.pem, id_rsa*, config.toml, ...) are left out."),
    )
    p.add_argument("path", nargs="?", default=".", help="agent folder or its agent.leviath (default: .)")
    p.add_argument("-o", "--output", default=None, metavar="FILE",
                   help="where to write it (default: NAME-VERSION.leviath-bundle here)")
    p.set_defaults(func=run_pack)


def _agent_info(manifest: Path) -> dict[str, Any]:
    """Name, version and description of one manifest, read leniently (a broken one still lists)."""
    import tomllib

    try:
        agent = tomllib.loads(manifest.read_text(encoding="utf-8")).get("agent", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {"version": "?", "description": "(its agent.leviath does not read)"}
    agent = agent if isinstance(agent, dict) else {}
    return {"version": str(agent.get("version", "0.1.0")), "description": str(agent.get("description", ""))}


def run_list(args: argparse.Namespace) -> int:
    """``lev list``."""
    from lev_nb.blueprint.errors import did_you_mean
    from lev_nb.catalog import list_agents

    if args.filter not in FILTERS:
        hint = did_you_mean(args.filter, FILTERS) or f"choose {', '.join(FILTERS)}"
        print(f"lev list: error: --filter '{args.filter}' is not one of {', '.join(FILTERS)} ({hint})", file=sys.stderr)
        return 2
    rows = []
    local = Path.cwd() / "agent.leviath"
    for entry in list_agents():
        rows.append({"name": entry.name, "source": entry.source, "path": str(entry.manifest), **_agent_info(entry.manifest)})
    if local.is_file():
        rows.append({"name": ".", "source": "local", "path": str(local), **_agent_info(local)})
    wanted = {"all": None, "agents": {"installed", "configured", "local"}, "blueprints": {"bundled"}}[args.filter]
    rows = [r for r in rows if wanted is None or r["source"] in wanted]
    if args.json:
        agents = [r for r in rows if r["source"] != "bundled"]
        bundled = [{"name": r["name"], "version": r["version"], "path": r["path"]} for r in rows if r["source"] == "bundled"]
        print(json.dumps({"agents": agents, "bundled": bundled}, indent=2))
        return 0
    titles = {"installed": "Installed ($LEV_HOME/agents, `lev add`)", "local": "In this folder",
              "configured": "From agent_paths in your configuration", "bundled": "Bundled with lev_nb"}
    seen: set[str] = set()
    for source in ("installed", "local", "configured", "bundled"):
        group = [r for r in rows if r["source"] == source]
        if not group:
            continue
        print(f"{titles[source]}:")
        for r in group:
            shadowed = " (hidden by the one above of that name)" if r["name"] in seen and r["name"] != "." else ""
            seen.add(r["name"])
            desc = f" - {r['description']}" if r["description"] else ""
            print(f"  {r['name']} (v{r['version']}){desc}{shadowed}")
        print()
    if not any(r["source"] != "bundled" for r in rows) and args.filter != "blueprints":
        print("No agent of your own yet: `lev create my-agent` starts one, `lev add PATH` installs one.")
    return 0


def run_add(args: argparse.Namespace) -> int:
    """``lev add PACKAGE``."""
    from lev_nb.catalog.bundles import BundleError, install
    from lev_nb.catalog.inventory import capabilities

    try:
        done = install(args.package)
    except BundleError as exc:
        return fail("add", exc)
    verb = "Replaced" if done.replaced else "Installed"
    print(f"{verb} agent '{done.name}' v{done.version} in {done.path}")
    asks = capabilities(done.blueprint)
    if asks:
        print(f"\n'{done.name}' asks for the following; read it before you run it:")
        for line in asks:
            print(f"  - {line}")
        print(f"Look closer with: lev validate {done.name}")
    print(f"Run it with: lev run {done.name} --task \"...\"")
    return 0


def run_remove(args: argparse.Namespace) -> int:
    """``lev remove NAME``."""
    from lev_nb.catalog.bundles import BundleError, uninstall

    try:
        folder = uninstall(args.name)
    except BundleError as exc:
        return fail("remove", exc)
    print(f"Removed agent '{args.name}' ({folder})")
    return 0


def run_create(args: argparse.Namespace) -> int:
    """``lev create NAME [--template T]``."""
    from lev_nb.catalog.templates import create
    from lev_nb.errors import UsageError

    try:
        folder = create(args.name, args.template)
    except UsageError as exc:
        return fail("create", exc)
    print(f"Created {folder}/ (template {args.template}): agent.leviath, .gitignore, .env.example")
    print(f"Next: lev validate {folder}  |  lev graph {folder}  |  lev run {folder} --task \"...\" --model mock")
    return 0


def run_pack(args: argparse.Namespace) -> int:
    """``lev pack [PATH] [-o FILE]``."""
    from lev_nb.catalog.bundles import BundleError, pack

    try:
        done = pack(args.path, args.output)
    except (BundleError, OSError) as exc:
        return fail("pack", exc)
    print(f"Packed agent '{done.name}' v{done.version}: {len(done.files)} files, {done.size:,} bytes -> {done.path}")
    if done.skipped:
        print(f"Left out: {', '.join(done.skipped)}")
    print(f"Install it with: lev add {done.path}")
    return 0
