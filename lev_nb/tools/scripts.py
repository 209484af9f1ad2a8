"""An agent's own Rhai tools (``tools/*.rhai``) as run tools.

Discovery and execution are :mod:`lev_nb.scripting`'s; this module adapts a discovered script to a
:class:`ToolDef` and gives it a host whose I/O is held to the run's rules: files stay inside the
workdir, the shell follows the stage's policy for the built-in ``shell`` tool (and its redirects
stay inside the workdir), environment variables that look like credentials are refused, and HTTP
obeys the address policy and timeout of provider scripts.
"""

from __future__ import annotations

import functools
import os
import subprocess
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lev_nb.tools import reaper
from lev_nb.tools.context import ToolContext
from lev_nb.tools.registry import PolicyName, ToolDef
from lev_nb.sandbox import Sandbox
from lev_nb.secrets import ShellEnv, child_environment, env_var_allowed
from lev_nb.tools.write_budget import WriteBudget
from lev_nb.workspace import Workspace

if TYPE_CHECKING:
    from lev_nb.scripting import ToolScript

SHELL_TIMEOUT_S = 60
HOST_OUTPUT_CAP = 900_000
# After a command's shell exits, how long its output pipes may stay open (background children
# holding them) before those children are stopped.
LEFTOVER_GRACE_S = 0.5

__all__ = ["GLOBAL_TOOLS_DIR", "RunToolHost", "global_tools_dir", "global_tool_defs", "script_tool_def", "script_tool_defs"]

GLOBAL_TOOLS_DIR = "tools"  # $LEV_HOME/tools/*.rhai: offered to every agent that lists the tool


def _collect(proc: subprocess.Popen[bytes]) -> tuple[str, str]:
    """The command's stdout and stderr (each capped), once its shell has exited.

    The command is over when its shell exits: what it left running in the background (holding
    the output pipes open) is stopped then, instead of being waited for until the timeout. Past
    SHELL_TIMEOUT_S the whole group is killed and TimeoutError raised.
    """
    from lev_nb.tools.builtin import kill_group

    chunks: dict[str, list[bytes]] = {"out": [], "err": []}

    def drain(name: str, stream: Any) -> None:
        kept = 0
        for block in iter(lambda: stream.read1(65536), b""):
            if kept < HOST_OUTPUT_CAP:
                chunks[name].append(block)
                kept += len(block)

    readers = [threading.Thread(target=drain, args=(name, stream), daemon=True)
               for name, stream in (("out", proc.stdout), ("err", proc.stderr))]
    for reader in readers:
        reader.start()
    try:
        proc.wait(timeout=SHELL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid)
        proc.wait()
        raise TimeoutError(f"shell: the command ran past its {SHELL_TIMEOUT_S} s limit and was stopped") from None
    finally:
        for reader in readers:
            reader.join(timeout=LEFTOVER_GRACE_S)  # output still on its way from the shell's last writes
        if any(reader.is_alive() for reader in readers):
            kill_group(proc.pid)  # background children still hold the pipes: stop them
        for reader in readers:
            reader.join()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    return _text(chunks["out"]), _text(chunks["err"])


def _text(parts: list[bytes]) -> str:
    return b"".join(parts)[:HOST_OUTPUT_CAP].decode("utf-8", errors="replace")


class RunToolHost:
    """The I/O a script tool may do inside one run."""

    def __init__(self, workspace: Workspace, shell_allowed: bool, sandbox: Sandbox | None = None, *,
                 allow_local_network: bool = False, http_timeout_s: float | None = 30.0,
                 refusals: Mapping[str, str | None] | None = None, shell_env: ShellEnv | None = None,
                 writes: WriteBudget | None = None, allowed_env: tuple[str, ...] = ()) -> None:
        self.workspace = workspace
        self.writes = writes or WriteBudget()  # [limits] write caps and the free-disk guard
        self.shell_env = shell_env  # [security] shell_env: what shell() commands inherit
        self.allowed_env = allowed_env  # [security] allow_env_vars: credential-named variables it may read
        self.sandbox = sandbox
        # Host function -> why it is refused (None: permitted); lev_nb.tools.policy.script_host_permissions.
        if refusals is None:
            refusals = {"shell": None if shell_allowed else "the stage's policy for the shell tool is not 'allow'"}
        self.refusals = dict(refusals)
        # The address policy and timeout provider scripts obey too ([security] allow_local_network,
        # [limits] script_http_timeout_secs): lev_nb.providers.script_http is their one home.
        self.allow_local_network = allow_local_network
        self.http_timeout_s = http_timeout_s

    def _check(self, function: str) -> None:
        why = self.refusals.get(function)
        if why is not None:
            raise PermissionError(f"[denied] script host function '{function}' is not permitted: {why}")

    def read_file(self, path: str) -> str:
        from lev_nb.tools.builtin import read_capped

        self._check("read_file")
        data, _ = read_capped(self.workspace.resolve(path), HOST_OUTPUT_CAP)
        return data.decode("utf-8", errors="replace")

    def write_file(self, path: str, content: str) -> str:
        self._check("write_file")
        target = self.workspace.resolve(path, for_write=True)
        data = content.encode("utf-8")
        refused = self.writes.admit("script host function 'write_file'", path, target, len(data))
        if refused is not None:
            raise PermissionError(refused)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return f"wrote {len(data)} bytes to {path}"

    def shell(self, command: str) -> str:
        from lev_nb.blueprint.shellkeys import analyse
        from lev_nb.tools.redirects import confine_writes

        self._check("shell")
        if analyse(command).writes:
            self._check("write_file")  # a redirect is a write
        refused = confine_writes(self.workspace, command, who="script host function 'shell'", nameless_ok=False)
        if refused is not None:
            raise PermissionError(refused)
        refused, sizes = self.writes.before_shell("script host function 'shell'", self.workspace, command)
        if refused is not None:
            raise PermissionError(refused)
        note = None
        try:
            out = self._run(command)
        finally:  # what its redirects wrote counts however it ended
            note = self.writes.after_shell("script host function 'shell'", sizes)
        return out if note is None else f"{out}\n{note}"

    def _run(self, command: str) -> str:
        """Run one checked command line for a script; its output."""
        from lev_nb.tools.builtin import command_line

        # In the stage's sandbox; its own process group, so a timeout stops what the command
        # spawned too; no credentials.
        gate = reaper.Gate()  # it runs once its group dies with this process, however that ends
        try:
            proc = subprocess.Popen(
                gate.argv(command_line(self.sandbox, command)), cwd=self.workspace.root, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, stdin=gate.stdin, env=child_environment(policy=self.shell_env), start_new_session=True,
            )
        except BaseException:
            gate.close()
            raise
        gate.open(proc.pid)
        try:
            stdout, stderr = _collect(proc)
        finally:
            reaper.release(proc.pid)
        out = stdout + (f"\n{stderr}" if stderr.strip() else "")
        return out[:HOST_OUTPUT_CAP]

    def http_get(self, url: str, headers: dict[str, str]) -> str:
        return self._http("GET", url, None, headers)

    def http_post(self, url: str, body: str, headers: dict[str, str]) -> str:
        return self._http("POST", url, body, headers)

    def _http(self, method: str, url: str, body: str | None, headers: dict[str, str]) -> str:
        from lev_nb.providers.script_http import ScriptHttpError, request

        self._check(f"http_{method.lower()}")
        try:
            return request(method, url, body, headers, timeout=self.http_timeout_s,
                           allow_local=self.allow_local_network)
        except ScriptHttpError as exc:  # the script can catch it; the message says what happened
            raise RuntimeError(f"http_{method.lower()} {url}: {exc.message}") from None

    def env_var(self, name: str) -> str:
        import os

        self._check("env_var")
        if not env_var_allowed(name, self.allowed_env):
            raise PermissionError(
                f"[denied] '{name}' looks like a credential, so script tools may not read it unless "
                "[security] allow_env_vars lists it"
            )
        value = os.environ.get(name)
        if value is None:
            raise LookupError(f"environment variable '{name}' is not set")
        return value


def script_tool_defs(agent_dir: str | Path | None, reserved: set[str]) -> tuple[list[ToolDef], list[Any]]:
    """ToolDefs for the agent's ``tools/*.rhai`` and the files that were skipped (with reasons)."""
    if agent_dir is None:
        return [], []
    from lev_nb.scripting import discover_tools

    found, skipped = discover_tools([Path(agent_dir) / "tools"], reserved=tuple(sorted(reserved)))
    return [script_tool_def(tool) for tool in found.values()], skipped


def global_tools_dir(home: str | Path | None = None) -> Path:
    """The global tools folder, ``$LEV_HOME/tools`` (``home`` instead of ``$LEV_HOME`` when given)."""
    from lev_nb.settings.paths import in_home

    return in_home(GLOBAL_TOOLS_DIR, home)


def global_tool_defs(home: str | Path | None, reserved: set[str] | Callable[[], set[str]]) -> tuple[list[ToolDef], list[Any]]:
    """ToolDefs for ``$LEV_HOME/tools/*.rhai``, compiled now (at spawn), and the files skipped
    (with reasons). ``reserved`` holds the built-in names and the agent's own tools, which shadow
    a global tool of the same name; a function giving them is asked only when the folder exists
    (most homes have none, and every run start asks)."""
    folder = global_tools_dir(home)
    if not os.path.isdir(folder):
        return [], []
    from lev_nb.scripting import discover_tools

    names = reserved() if callable(reserved) else reserved
    found, skipped = discover_tools([folder], reserved=tuple(sorted(names)))
    return [script_tool_def(tool) for tool in found.values()], skipped


def script_tool_def(tool: ToolScript) -> ToolDef:
    """The run tool of one compiled tool script."""
    from lev_nb.scripting import run_tool

    async def handler(ctx: ToolContext, args: dict[str, Any]) -> str:
        # (shell allowed, host function -> why refused), from the engine's batch; none: a seed's call
        permissions = ctx.extra.get("script_permissions")
        shell_allowed, refusals = permissions() if permissions is not None else (False, None)
        host = RunToolHost(
            ctx.workspace, shell_allowed=shell_allowed, sandbox=ctx.sandbox, refusals=refusals,
            allow_local_network=bool(ctx.extra.get("allow_local_network")),
            http_timeout_s=ctx.extra.get("http_timeout_s", 30.0), shell_env=ctx.extra.get("shell_env"),
            writes=ctx.writes, allowed_env=tuple(ctx.extra.get("allow_env_vars") or ()),
        )
        # run_tool validates the arguments itself; the executor already did, so skip it here.
        return await ctx.blocking(functools.partial(run_tool, tool, args, host, validate_arguments=False))

    # A script that asks for no capability can only compute, so it runs without asking;
    # one that wants the shell, files or network is asked for like any other such tool.
    policy: PolicyName = "allow" if not tool.requires else "ask"
    description = tool.description or f"Rhai tool '{tool.name}'"
    return ToolDef(
        tool.name, description, tool.parameters_schema, handler=handler, default_policy=policy,
        readonly=not tool.requires, requires=tuple(tool.requires),
    )

