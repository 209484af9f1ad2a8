"""``lev mcp serve``: our agents as MCP tools, driven by the SDK's own client over stdio and over
streamable HTTP on 127.0.0.1, running a bundled agent on the mock model."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from mcp_probes import free_port, wait_for_port
from support import ROOT


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    env["LEV_HOME"] = str(home)
    env["PYTHONPATH"] = str(ROOT)
    return env


def _serve_args(*extra: str) -> list[str]:
    return ["-m", "lev_nb.cli", "mcp", "serve", *extra]


async def _drive(client: Any) -> tuple[Any, Any, list[str]]:
    tools = await client.list_tools()
    progress: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    result = await client.call_tool("triage", {"task": "1: the app crashes on start\n2: please add dark mode"},
                                    progress_callback=on_progress)
    return tools, result, progress


def test_serve_over_stdio_runs_a_bundled_agent_on_the_mock_model(home: Path, tmp_path: Path) -> None:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    home.mkdir(parents=True, exist_ok=True)
    params = StdioServerParameters(command=sys.executable, args=_serve_args("triage", "--model", "mock",
                                                                            "--workdir", str(tmp_path)),
                                   env=_env(home), cwd=str(tmp_path))

    async def main() -> tuple[Any, Any, list[str]]:
        with open(tmp_path / "stderr.log", "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=300) as client:
                return await _drive(client)

    tools, result, progress = asyncio.run(main())
    (tool,) = tools.tools
    assert tool.name == "triage" and "Classifies incoming reports" in (tool.description or "")
    assert tool.input_schema["required"] == ["task"]
    assert not result.is_error, result.content
    assert result.structured_content["status"] == "complete"
    assert result.content[0].text.strip()  # the run's final output
    assert any(m.startswith("stage 'read'") for m in progress)
    run_dir = home / "runs" / result.structured_content["run_id"]
    assert (run_dir / "meta.json").exists()


def test_serve_over_streamable_http(home: Path, tmp_path: Path) -> None:
    from mcp import Client

    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    proc = subprocess.Popen([sys.executable, *_serve_args("triage", "--model", "mock", "--port", str(port),
                                                         "--workdir", str(tmp_path))],
                            env=_env(home), cwd=str(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_port(port, proc)

        async def main() -> tuple[Any, Any, list[str]]:
            async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=300) as client:
                return await _drive(client)

        tools, result, progress = asyncio.run(main())
    finally:
        proc.terminate()
        proc.wait(30)
    assert [t.name for t in tools.tools] == ["triage"]
    assert not result.is_error and result.structured_content["status"] == "complete"
    assert progress


def test_an_agent_that_does_not_exist_is_one_clear_error(lev: Any) -> None:
    done = lev("mcp", "serve", "triag", "--model", "mock")
    assert done.returncode == 1
    assert "'triag' is neither an agent folder, an agent.leviath, nor a bundled agent (did you mean 'triage'?)" in done.stderr


def test_a_denied_tool_inside_the_served_agent_is_reported_not_hung(home: Path, tmp_path: Path) -> None:
    """The served agent's own tools follow serve's launch options: nobody approves, so ask is denied."""
    from lev_nb.mcp.server import build_server, served_agents

    agent_dir = tmp_path / "writer"
    agent_dir.mkdir()
    (agent_dir / "agent.leviath").write_text(
        '[agent]\nname = "writer"\n\n[stages.write]\nmode = "autonomous"\navailable_tools = ["write_file"]\n'
        'max_iterations = 3\ntransitions = []\n', encoding="utf-8")
    script = tmp_path / "script.json"
    script.write_text('[{"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}]},'
                      ' {"text": "done"}]', encoding="utf-8")
    from mcp import Client

    async def main(allow: list[str]) -> Any:
        server = build_server(served_agents([str(agent_dir)]), model=f"scripted:{script}", allow=allow,
                              workdir=str(tmp_path / "work"))
        async with Client(server) as client:
            return await client.call_tool("writer", {"task": "write a.txt"})

    denied = asyncio.run(main([]))
    assert not denied.is_error and not (tmp_path / "work" / "a.txt").exists()
    allowed = asyncio.run(main(["write_file"]))
    assert not allowed.is_error and (tmp_path / "work" / "a.txt").read_text() == "x"


def test_serve_offers_every_bundled_agent_by_default() -> None:
    from mcp import Client

    from lev_nb.blueprint.bundled import bundled_agent_names
    from lev_nb.mcp.server import build_server, served_agents

    async def main() -> list[str]:
        async with Client(build_server(served_agents([]), model="mock")) as client:
            return sorted(t.name for t in (await client.list_tools()).tools)

    names = asyncio.run(main())
    assert len(names) == len(bundled_agent_names()) and "triage" in names
