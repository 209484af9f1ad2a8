"""``lev mcp``: manage the MCP tool servers of ``config.toml``, and serve agents as MCP tools.

``add`` / ``remove`` edit ``[[mcp_servers]]`` (the rest of the file is kept as written), ``list``
shows them, ``test`` starts one and lists its tools, ``serve`` runs ``lev_nb.mcp.server``. OAuth
login is left out: ``login`` / ``logout`` say so and point at ``--header``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from lev_nb.cli.dispatch import settings_or_none

# `--arg -y` passes "-y" through to the server's command line: joined as `--arg=-y` before argparse.
_VALUE_OPTIONS = ("--arg", "--env", "--header")


def join_option_values(argv: list[str]) -> list[str]:
    """``lev mcp add ... --arg -y`` -> ``--arg=-y``, so a server's own flag is not read as ours."""
    start = next((i for i in range(len(argv) - 1) if argv[i] == "mcp" and argv[i + 1] == "add"), None)
    if start is None:
        return argv
    out: list[str] = argv[:start]
    i = start
    while i < len(argv):
        item = argv[i]
        if item in _VALUE_OPTIONS and i + 1 < len(argv):
            out.append(f"{item}={argv[i + 1]}")
            i += 2
            continue
        out.append(item)
        i += 1
    return out


def add_mcp(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev mcp`` and its subcommands."""
    p = subparsers.add_parser(
        "mcp", help="manage MCP tool servers; serve agents as MCP tools",
        description="Manage the MCP (Model Context Protocol) servers in config.toml ([[mcp_servers]]), "
                    "whose tools a blueprint grants as server__tool or with available_connectors; "
                    "and serve agents as MCP tools (lev mcp serve).",
        epilog="examples:\n"
               "  lev mcp add files --command npx --arg -y --arg @modelcontextprotocol/server-filesystem --arg .\n"
               "  lev mcp add remote --url https://mcp.example.com/mcp --header \"Authorization=Bearer ${TOKEN}\"\n"
               "  lev mcp test files\n"
               "  lev mcp serve triage --model mock",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mcp_command", metavar="SUBCOMMAND", required=True,
                           help="add, list, remove, test, serve (login and logout say OAuth is left out)")

    add = sub.add_parser("add", help="add a server to config.toml")
    add.add_argument("name", help="the server's name (its tools are advertised as NAME__tool)")
    add.add_argument("--command", dest="server_command", default=None, help="a stdio server: the program to run")
    add.add_argument("--arg", action="append", default=[], metavar="ARG",
                     help="an argument of the command (repeatable; '--arg -y' passes -y through)")
    add.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                     help="an environment variable for the command (repeatable; ${VAR} is expanded at start)")
    add.add_argument("--url", default=None, help="an HTTP server: its endpoint (streamable HTTP, or legacy SSE)")
    add.add_argument("--header", action="append", default=[], metavar="KEY=VALUE",
                     help="an HTTP header (repeatable; ${VAR} is expanded when connecting)")
    add.add_argument("--no-login", action="store_true", help="accepted for compatibility (lev_nb has no OAuth login)")
    add.set_defaults(func=run_add)

    ls = sub.add_parser("list", help="list the configured servers")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(func=run_list)

    rm = sub.add_parser("remove", help="remove a server from config.toml")
    rm.add_argument("name", help="the server to remove")
    rm.set_defaults(func=run_remove)

    test = sub.add_parser("test", help="start a server and list its tools")
    test.add_argument("name", help="the server to start")
    test.add_argument("--json", action="store_true", help="print JSON")
    test.set_defaults(func=run_test)

    for word in ("login", "logout"):
        auth = sub.add_parser(word, help="not supported: lev_nb has no OAuth login (use --header)")
        auth.add_argument("name", help="the server")
        auth.set_defaults(func=run_no_oauth)

    serve = sub.add_parser(
        "serve", help="run an MCP server whose tools are agents",
        description="Run an MCP server (stdio by default; streamable HTTP on 127.0.0.1 with --port) whose "
                    "tools are agents: each AGENT (a folder, an agent.leviath, or a bundled agent's name; "
                    "default: every bundled agent) becomes a tool that takes a task and the agent's inputs "
                    "and returns its final output.")
    serve.add_argument("agents", nargs="*", metavar="AGENT",
                       help="agent folders, agent.leviath files or bundled agents' names (default: every bundled agent)")
    serve.add_argument("--port", type=int, default=None, help="serve streamable HTTP on 127.0.0.1:PORT (path /mcp)")
    serve.add_argument("-m", "--model", default=None, help="the model of every run: provider/model, mock, scripted:FILE")
    serve.add_argument("--allow", action="append", default=[], metavar="TOOL",
                       help="a tool the agents may use without asking (repeatable)")
    serve.add_argument("--yolo", action="store_true", help="every tool that would ask runs unasked (deny stays deny)")
    serve.add_argument("--workdir", default=None, metavar="DIR", help="where the runs work (default: the current folder)")
    serve.set_defaults(func=run_serve)


def _pairs(items: list[str], option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{option} must be KEY=VALUE, got '{item}'")
        out[key.strip()] = value
    return out


def run_add(args: argparse.Namespace) -> int:
    """``lev mcp add NAME (--command CMD [--arg A]... [--env K=V]... | --url URL [--header K=V]...)``."""
    from lev_nb.settings import ConfigError, config_path
    from lev_nb.settings.edit import add_mcp_server
    from lev_nb.settings.mcp_servers import McpServer, ServerEntryError, parse_servers

    if bool(args.server_command) == bool(args.url):
        print("lev mcp add: give either --command (a stdio server) or --url (an HTTP server)", file=sys.stderr)
        return 2
    try:
        env, headers = _pairs(args.env, "--env"), _pairs(args.header, "--header")
        table: dict[str, Any] = {"name": args.name}
        if args.server_command:
            table.update(command=args.server_command, args=args.arg, env=env)
            if headers:
                raise ValueError("--header is for an HTTP server (--url)")
        else:
            table.update(url=args.url, headers=headers)
            if args.arg or env:
                raise ValueError("--arg and --env are for a stdio server (--command)")
        (server,) = parse_servers([table])
    except (ValueError, ServerEntryError) as exc:
        print(f"lev mcp add: {exc}", file=sys.stderr)
        return 2
    assert isinstance(server, McpServer)
    path = config_path()
    try:
        add_mcp_server(path, server)
    except ConfigError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    print(f"Added MCP server '{server.name}' ({server.transport}: {server.describe()}) to {path}.")
    print(f"Its tools are named {server.name}__<tool>; see them with: lev mcp test {server.name}")
    return 0


def run_list(args: argparse.Namespace) -> int:
    """``lev mcp list [--json]``."""
    settings = settings_or_none()
    if settings is None:
        return 1
    servers = settings.mcp_servers
    if args.json:
        # Header values may be credentials written out: their names are enough to show.
        print(json.dumps([{**s.to_table(), **({"headers": sorted(s.headers)} if s.headers else {}),
                           "auth": "headers" if s.headers else "none"} for s in servers], indent=2))
        return 0
    if not servers:
        print(f"No MCP servers are configured ({settings.path}). Add one with: lev mcp add NAME --command ... | --url ...")
        return 0
    width = max(len(s.name) for s in servers)
    for s in servers:
        auth = "  [headers]" if s.headers else ""
        print(f"{s.name.ljust(width)}  {s.transport:<5}  {s.describe()}{auth}")
    return 0


def run_remove(args: argparse.Namespace) -> int:
    """``lev mcp remove NAME``."""
    from lev_nb.settings import ConfigError, config_path
    from lev_nb.settings.edit import remove_mcp_server

    path = config_path()
    try:
        removed = remove_mcp_server(path, args.name)
    except ConfigError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    if not removed:
        print(f"lev mcp remove: no MCP server named '{args.name}' in {path} (see lev mcp list)", file=sys.stderr)
        return 1
    print(f"Removed MCP server '{args.name}' from {path}.")
    return 0


def run_test(args: argparse.Namespace) -> int:
    """``lev mcp test NAME [--json]``: start the server and list its tools; exit 1 if it cannot start."""
    from lev_nb.blueprint.errors import did_you_mean

    settings = settings_or_none()
    if settings is None:
        return 1
    server = settings.mcp_server(args.name)
    if server is None:
        hint = did_you_mean(args.name, [s.name for s in settings.mcp_servers])
        print(f"lev mcp test: no MCP server named '{args.name}'" + (f" ({hint})" if hint else "")
              + " (see lev mcp list)", file=sys.stderr)
        return 1
    try:
        from lev_nb.mcp.client import McpBroker, missing_vars, qualified, server_prefixes
    except ImportError as exc:  # the SDK is an extra
        print(f"lev mcp test: the mcp package is not installed ({exc}); pip install 'lev_nb[mcp]'", file=sys.stderr)
        return 1
    for var in missing_vars({**server.env, **server.headers}):
        print(f"lev: warning: ${{{var}}} is not set in the environment, so it is sent empty", file=sys.stderr)
    limits = settings.limits
    hub = McpBroker()  # its own: the process's servers (a notebook's runs) are left alone
    try:
        (status,) = hub.run_sync(hub.start([server], connect_timeout=limits.mcp_connect_timeout_secs,
                                           max_restarts=0))
    finally:
        hub.shutdown()
    prefix = server_prefixes(s.name for s in settings.mcp_servers)[server.name]
    if args.json:
        data = status.to_dict()
        data["tools"] = [{"name": qualified(prefix, t.name), "description": t.description,
                          "input_schema": t.input_schema} for t in status.tools]
        print(json.dumps(data, indent=2))
        return 0 if status.error is None else 1
    if status.error is not None:
        print(f"✗ {status.error}", file=sys.stderr)
        return 1
    print(f"✓ MCP server '{server.name}' ({server.transport}) answered with {len(status.tools)} tool"
          f"{'s' if len(status.tools) != 1 else ''}:")
    for tool in status.tools:
        first = (tool.description.strip().splitlines() or [""])[0]
        print(f"  {qualified(prefix, tool.name)}" + (f"  - {first[:100]}" if first else ""))
    return 0


def with_remote_tools(bp: Any, env: Any) -> Any:
    """``lev validate --remote``: the lint environment with the tool lists of the MCP servers the
    blueprint names, asked from the servers themselves (one that cannot be reached is left
    unchecked, and stderr says why)."""
    import dataclasses

    from lev_nb.blueprint.mcp_names import qualified, server_prefixes, split_qualified
    from lev_nb.settings import ConfigError, current

    if env.mcp_servers is None:
        return env
    try:
        settings = current()
    except ConfigError:
        return env
    prefixes = server_prefixes(s.name for s in settings.mcp_servers)
    named: set[str] = set()
    for stage in bp.stages.values():
        named.update(p[0] for p in map(split_qualified, stage.available_tools) if p is not None)
        named.update(stage.available_connectors)
    servers = [s for s in settings.mcp_servers if s.name in named or prefixes[s.name] in named]
    if not servers:
        return env
    try:
        from lev_nb.mcp.client import McpBroker
    except ImportError as exc:
        print(f"lev: warning: --remote needs the mcp package ({exc}); MCP tool names are not checked", file=sys.stderr)
        return env
    hub = McpBroker()
    try:
        statuses = hub.run_sync(hub.start(servers, connect_timeout=settings.limits.mcp_connect_timeout_secs,
                                          max_restarts=0))
    finally:
        hub.shutdown()
    known = dict(env.mcp_servers)
    for status in statuses:
        if status.error is not None:
            print(f"lev: warning: {status.error}; the names of its tools are not checked", file=sys.stderr)
            continue
        prefix = prefixes[status.name]
        known[status.name] = known[prefix] = frozenset(qualified(prefix, t.name) for t in status.tools)
    return dataclasses.replace(env, mcp_servers=known)


def run_no_oauth(args: argparse.Namespace) -> int:
    """``lev mcp login|logout``: OAuth is left out of lev_nb."""
    print(f"lev mcp {args.mcp_command}: lev_nb has no OAuth login for MCP servers. For a server that takes a "
          f"token, configure it as a header: lev mcp add {args.name} --url URL --header \"Authorization=Bearer "
          "${TOKEN}\"", file=sys.stderr)
    return 1


def run_serve(args: argparse.Namespace) -> int:
    """``lev mcp serve [AGENT...] [--port N] [--model SPEC] [--allow TOOL]... [--yolo]``."""
    try:
        from lev_nb.mcp.server import ServeError, serve
    except ImportError as exc:
        print(f"lev mcp serve: the mcp package is not installed ({exc}); pip install 'lev_nb[mcp]'", file=sys.stderr)
        return 1
    try:
        serve(args.agents, port=args.port, model=args.model, allow=args.allow, yolo=args.yolo, workdir=args.workdir)
    except ServeError as exc:
        print(f"lev mcp serve: {exc}", file=sys.stderr)
        return 1
    return 0
