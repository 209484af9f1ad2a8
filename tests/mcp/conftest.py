"""Fixtures of the MCP tests: real MCP servers (written with the SDK) as subprocesses, configured
in the test's own LEV_HOME, and the process's broker stopped after each test."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp")

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


@pytest.fixture
def mcp_config(home: Path) -> Callable[..., Path]:
    """``mcp_config(entry, ..., limits="...")`` writes $LEV_HOME/config.toml with those entries."""

    def write(*entries: str, limits: str = "mcp_call_timeout_secs = 60\nmcp_connect_timeout_secs = 120\n",
              extra: str = "") -> Path:
        home.mkdir(parents=True, exist_ok=True)
        path = home / "config.toml"
        path.write_text(f"[limits]\n{limits}\n{extra}\n" + "\n".join(entries), encoding="utf-8")
        return path

    return write


@pytest.fixture(autouse=True)
def _fresh_broker() -> Iterator[None]:
    """Each test starts its own servers, and leaves none running."""
    yield
    from lev_nb.mcp.client import broker

    broker().shutdown()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int, proc: subprocess.Popen[bytes]) -> None:
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


def _serve(flag: str) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(PROBE), flag, str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_port(port, proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def http_probe() -> Iterator[str]:
    """The probe server over streamable HTTP on 127.0.0.1: its base URL (the endpoint is /mcp)."""
    yield from _serve("--http")


@pytest.fixture
def sse_probe() -> Iterator[str]:
    """The probe server over the legacy HTTP+SSE transport on 127.0.0.1: its base URL (/sse)."""
    yield from _serve("--sse")
