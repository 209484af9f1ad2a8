"""Fixtures of the MCP tests: real MCP servers (written with the SDK) as subprocesses, configured
in the test's own LEV_HOME, and the process's broker stopped after each test."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp_probes import PROBE, free_port, wait_for_port  # noqa: E402


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


def _serve(flag: str) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(PROBE), flag, str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, proc)
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
