"""Runs that use tools of real MCP servers (stdio subprocesses written with the SDK), driven by
the scripted model: what is advertised, approvals and denials, results, and every way a server
can fail without failing the run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcp_probes import GARBAGE, stdio_entry
from support import call, calls, events_of, say

STAGE = """
[stages.work]
mode = "autonomous"
available_tools = [{tools}]
{extra}
max_iterations = 6
transitions = []
"""


def bp(*tools: str, extra: str = "") -> str:
    return STAGE.format(tools=", ".join(json.dumps(t) for t in tools), extra=extra)


def tool_results(model: Any) -> list[str]:
    """The tool results the model was shown, in order."""
    from lev_nb.messages import ToolResultBlock

    seen: dict[str, str] = {}
    for request in model.requests:
        for message in request.messages:
            for block in message.content if isinstance(message.content, list) else []:
                if isinstance(block, ToolResultBlock):
                    seen.setdefault(block.tool_use_id, block.content)
    return list(seen.values())


def last_result(model: Any) -> str:
    return tool_results(model)[-1]


def test_an_allowed_call_runs_and_its_result_comes_back(engine: Any, mcp_config: Any) -> None:
    mcp_config(stdio_entry("probe"))
    run, model = engine.run(bp("probe__add"), [call("probe__add", a=2, b=40), say("done")], allow=["probe__add"])
    assert run.status == "complete", run.error
    assert last_result(model) == "42"
    offered = [t.name for t in model.requests[0].tools]
    assert offered == ["probe__add"]
    schema = next(t.parameters for t in model.requests[0].tools if t.name == "probe__add")
    assert schema["required"] == ["a", "b"]  # the server's own schema, as given
    servers = events_of(run, "mcp_servers")[0].servers
    assert servers[0]["name"] == "probe" and "probe__add" in servers[0]["tools"]
    from lev_nb.notebook.runview import RunState, snapshot_html, snapshot_text

    view = RunState(run.run_id, ["work"])
    for event in run.events.snapshot():
        view.apply(event)
    assert "MCP server probe (stdio): 9 tools: probe__add, probe__forecast" in snapshot_text(view)
    assert "MCP servers" in snapshot_html(view)


def test_a_call_nobody_approves_is_denied_and_says_how_to_allow_it(engine: Any, mcp_config: Any) -> None:
    mcp_config(stdio_entry("probe"))
    run, model = engine.run(bp("probe__add"), [call("probe__add", a=1, b=1), say("done")])
    assert run.status == "complete"
    assert last_result(model).startswith("[denied]") and "--allow probe__add" in last_result(model)


def test_the_approver_is_asked_and_its_no_is_kept(engine: Any, mcp_config: Any) -> None:
    mcp_config(stdio_entry("probe"))
    asked: list[tuple[str, dict[str, Any]]] = []

    def approver(name: str, arguments: dict[str, Any]) -> bool:
        asked.append((name, arguments))
        return arguments["a"] == 1

    run, model = engine.run(bp("probe__add"), [calls(("probe__add", {"a": 1, "b": 2}), ("probe__add", {"a": 5, "b": 5})),
                                               say("done")], approver=approver)
    assert run.status == "complete"
    assert [a for _, a in asked] == [{"a": 1, "b": 2}, {"a": 5, "b": 5}]
    assert tool_results(model) == ["3", "[denied] The user declined the call to 'probe__add'."]


def test_a_connector_grants_every_tool_and_yolo_lets_them_run(engine: Any, mcp_config: Any) -> None:
    mcp_config(stdio_entry("probe"))
    run, model = engine.run(bp("read_file", extra='available_connectors = ["probe"]'),
                            [call("probe__forecast", city="Oslo"), call("probe__picture"), call("probe__fail", reason="no luck"),
                             say("done")], yolo=True)
    assert run.status == "complete", run.error
    offered = {t.name for t in model.requests[0].tools}
    assert {"read_file", "probe__add", "probe__forecast", "probe__crash", "probe__hang"} <= offered
    forecast, picture, failed = tool_results(model)
    assert json.loads(forecast) == {"city": "Oslo", "sky": "clear", "high_c": 21}
    assert picture.startswith("[image returned: image/png")
    assert failed.startswith("[error] probe__fail:") and "no luck" in failed


def test_a_crash_mid_call_is_a_tool_error_and_the_server_comes_back(engine: Any, mcp_config: Any) -> None:
    mcp_config(stdio_entry("probe"))
    run, model = engine.run(bp("probe__crash", "probe__add"),
                            [call("probe__crash"), call("probe__add", a=1, b=2), say("done")], yolo=True)
    assert run.status == "complete", run.error
    crashed, after = tool_results(model)
    assert crashed.startswith("[error] probe__crash: MCP server 'probe'")
    assert "crashing on purpose" in crashed  # its last words, from stderr
    assert after == "3"  # started again for the next call
    log = Path(run.run_dir) / "mcp" / "probe.stderr.log"
    assert "crashing on purpose" in log.read_text()


def test_a_hang_past_the_timeout_is_a_timed_out_result(engine: Any, mcp_config: Any) -> None:
    # Long enough for the add call after it on a loaded machine: the hang is what times out.
    mcp_config(stdio_entry("probe"), limits="mcp_call_timeout_secs = 8\nmcp_connect_timeout_secs = 120\n")
    run, model = engine.run(bp("probe__hang", "probe__add"),
                            [call("probe__hang"), call("probe__add", a=2, b=2), say("done")], yolo=True)
    assert run.status == "complete", run.error
    hung, after = tool_results(model)
    assert hung.startswith("[timed out] probe__hang: MCP server 'probe' did not answer within 8s")
    assert after == "4"


def test_garbage_on_stdout_does_not_break_the_call(engine: Any, mcp_config: Any) -> None:
    mcp_config(stdio_entry("probe"))
    run, model = engine.run(bp("probe__noisy"), [call("probe__noisy"), say("done")], yolo=True)
    assert run.status == "complete", run.error
    assert last_result(model) == "answered after the noise"


def test_a_server_that_only_answers_garbage_is_a_warning_and_a_tool_error(engine: Any, mcp_config: Any) -> None:
    mcp_config(stdio_entry("junk", GARBAGE), limits="mcp_call_timeout_secs = 5\nmcp_connect_timeout_secs = 3\n")
    run, model = engine.run(bp("junk__anything"), [call("junk__anything"), say("done")], yolo=True)
    assert run.status == "complete", run.error
    assert model.requests[0].tools == [] or all(t.name != "junk__anything" for t in model.requests[0].tools)
    result = last_result(model)
    assert result.startswith("[error] junk__anything: MCP server 'junk' did not answer within 3s")
    warnings = [e.message for e in events_of(run, "warning")]
    assert any("MCP server 'junk'" in w for w in warnings)


def test_a_missing_server_or_command_is_a_warning_not_a_failed_run(engine: Any, mcp_config: Any) -> None:
    mcp_config("[[mcp_servers]]\nname = \"gone\"\ncommand = \"/nonexistent/mcp-server\"\n")
    run, model = engine.run(bp("gone__read", "ghost__read"),
                            [call("gone__read"), call("ghost__read"), say("done")], yolo=True)
    assert run.status == "complete", run.error
    gone, ghost = tool_results(model)
    assert gone.startswith("[error] gone__read: MCP server 'gone' could not be started: command not found")
    assert ghost.startswith("[unavailable]")
    warnings = " ".join(e.message for e in events_of(run, "warning"))
    assert "no MCP server 'ghost' is configured" in warnings and "MCP server 'gone'" in warnings


def test_twenty_concurrent_runs_share_one_server(engine: Any, mcp_config: Any) -> None:
    mcp_config(stdio_entry("probe"))
    runs = []
    for i in range(20):
        run, model = engine.start(bp("probe__add"), [call("probe__add", a=i, b=1000), say("done")], yolo=True)
        runs.append((i, run, model))
    for i, run, model in runs:
        run.wait(300)
        assert run.status == "complete", run.error
        assert last_result(model) == str(i + 1000)
    starts = set()
    for _, run, _ in runs:
        log = Path(run.run_dir) / "mcp" / "probe.stderr.log"
        if log.exists():
            starts.update(line for line in log.read_text().splitlines() if "started (pid" in line)
    assert len(starts) == 1  # one server process, started by the first run and shared by the others
    from lev_nb.mcp.client import broker

    assert broker().running() == ["probe"]


def test_a_hanging_server_does_not_hold_up_other_runs(engine: Any, mcp_config: Any) -> None:
    mcp_config(stdio_entry("probe"), limits="mcp_call_timeout_secs = 3600\nmcp_connect_timeout_secs = 120\n")
    stuck, _ = engine.start(bp("probe__hang"), [call("probe__hang"), say("done")], yolo=True)
    other, model = engine.run(bp("probe__add", "read_file"), [call("probe__add", a=1, b=1), say("done")], yolo=True)
    assert other.status == "complete" and last_result(model) == "2"
    assert not stuck.done()  # still waiting for its answer, on the broker's loop
    stuck.cancel()
    stuck.wait(60)
    assert stuck.status == "cancelled"


def test_restarts_are_bounded(engine: Any, mcp_config: Any) -> None:
    mcp_config(stdio_entry("probe"), limits="mcp_call_timeout_secs = 60\nmcp_connect_timeout_secs = 120\n"
                                            "mcp_max_restarts = 1\n")
    turns = [call("probe__crash"), call("probe__crash"), call("probe__add", a=1, b=1), say("done")]
    run, model = engine.run(bp("probe__crash", "probe__add"), turns, yolo=True)
    assert run.status == "complete", run.error
    first, second, third = tool_results(model)
    assert first.startswith("[error] probe__crash:") and second.startswith("[error] probe__crash:")
    assert third.startswith("[error] probe__add: MCP server 'probe' stopped 2 times and is not started again in "
                            "this process (MCP server 'probe' ")
    assert third.endswith("its last stderr line: probe: crashing on purpose)")


def test_an_mcp_call_goes_through_the_stages_hooks(engine: Any, mcp_config: Any, tmp_path: Path) -> None:
    from lev_nb.blueprint import load

    mcp_config(stdio_entry("probe"))
    folder = tmp_path / "agent"
    (folder / "hooks").mkdir(parents=True)
    (folder / "hooks" / "h.rhai").write_text(
        'fn on_tool_call(ctx) {\n'
        '    let c = ctx.tool_calls[0];\n'
        '    if c.name != "probe__add" { return false; }\n'
        '    #{action: "modify", value: [#{name: "probe__add", arguments: #{a: 100, b: c.arguments.b}}]}\n'
        '}\n', encoding="utf-8")
    (folder / "agent.leviath").write_text(
        '[agent]\nname = "hooked"\n' + bp("probe__add") + '[stages.work.hooks]\non_tool_call = "hooks/h.rhai"\n',
        encoding="utf-8")
    run, model = engine.run(load(folder), [call("probe__add", a=1, b=1), say("done")], allow=["probe__add"])
    assert run.status == "complete", run.error
    assert last_result(model) == "101"
