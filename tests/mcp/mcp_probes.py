"""The MCP tests' servers and what their configuration needs (imported by name: a test module
importing ``conftest`` gets whichever conftest was imported first)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

SERVERS = Path(__file__).resolve().parent / "servers"
PROBE = SERVERS / "probe_server.py"
GARBAGE = SERVERS / "garbage_server.py"
START_TIMEOUT_S = 120  # a loaded machine may take long to import the SDK: never a timed assertion


def toml_str(value: str) -> str:
    """A TOML basic string."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def stdio_entry(name: str, script: Path = PROBE, *args: str) -> str:
    """A [[mcp_servers]] entry that runs ``script`` with this Python."""
    arg_list = ", ".join(toml_str(a) for a in [str(script), *args])
    return f"[[mcp_servers]]\nname = {toml_str(name)}\ncommand = {toml_str(sys.executable)}\nargs = [{arg_list}]\n"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes]) -> None:
    """Wait until ``proc`` listens on ``port`` (raising if it exits, or never does)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the test server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the test server did not start listening")
