"""Issue 12 item 7: one run cannot stall another.

Output validators, custom-region rendering and the on_write/on_overflow of every write into a
custom region (a context tool, a routed tool result, a seed, a hook's modification, a nudge, a
compaction summary) run off the shared engine thread; approvals waiting for a person hold no shared
worker thread; and a run's
blocking tool calls hold at most ``BLOCKING_PER_RUN`` of the shared worker threads. Each test holds
run A inside the slow part with an Event, finishes a one-turn run B meanwhile, then lets A go: with
the old behaviour B could not finish until A was released (the test would time out)."""

from __future__ import annotations

import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from support import OUTPUT_STAGE, QUIET_WORK_STAGE, RUN_TIMEOUT_S, call, calls, say

from lev_nb.scripting import RegionScript, Validator
from lev_nb.tools import builtin
from lev_nb.tools.context import BLOCKING_PER_RUN


class Gate:
    """Holds whoever calls :meth:`hold` until :meth:`release`; says when someone is held."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()
        self.held = 0
        self._lock = threading.Lock()

    def hold(self) -> None:
        with self._lock:
            self.held += 1
        self.entered.set()
        assert self.released.wait(RUN_TIMEOUT_S), "never released"

    def release(self) -> None:
        self.released.set()


@pytest.fixture
def gate() -> Any:
    g = Gate()
    yield g
    g.release()  # never leave a worker thread blocked behind a failed test


def _quick_run_finishes_while_held(engine, run_a, gate: Gate) -> None:
    assert gate.entered.wait(RUN_TIMEOUT_S)
    run_b, _ = engine.run(QUIET_WORK_STAGE, [call("list_dir", path="."), say("done")])
    assert run_b.status == "complete", run_b.error
    assert not run_a.done()  # A is still inside its slow part
    gate.release()
    run_a.wait(RUN_TIMEOUT_S)
    assert run_a.status == "complete", run_a.error


def test_a_slow_validator_does_not_stall_other_runs(engine, gate: Gate, monkeypatch: pytest.MonkeyPatch) -> None:
    original = Validator.check

    def slow_check(self: Validator, content: str) -> Any:
        if content == "slow":
            gate.hold()
        return original(self, content)

    monkeypatch.setattr(Validator, "check", slow_check)
    run_a, _ = engine.start(OUTPUT_STAGE, [call("submit_output", content="slow"), say("ok")],
                            output_validator="fn validate(c) { () }")
    _quick_run_finishes_while_held(engine, run_a, gate)
    assert run_a.result.content == "slow"


def test_a_slow_region_render_does_not_stall_other_runs(engine, gate: Gate, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from lev_nb.blueprint import load

    folder = tmp_path / "agent"
    (folder / "context_hooks").mkdir(parents=True)
    (folder / "context_hooks" / "board.rhai").write_text('fn render(ctx) { "BOARD" }')
    (folder / "agent.leviath").write_text(textwrap.dedent("""
        [agent]
        name = "slow-region"
        [context.regions.board]
        kind = "custom"
        script = "context_hooks/board.rhai"
        max_tokens = 1000
        [context.regions.conversation]
        kind = "sliding_window"
        max_tokens = 5000
        [stages.work]
        available_tools = ["list_dir"]
        nudge = { enabled = false }
        [stages.work.transitions]
        """))
    original = RegionScript.render

    def slow_render(self: RegionScript, ctx: Any) -> Any:
        gate.hold()
        return original(self, ctx)

    monkeypatch.setattr(RegionScript, "render", slow_render)
    run_a, model = engine.start(load(folder), [say("done")])
    _quick_run_finishes_while_held(engine, run_a, gate)
    assert "BOARD" in "\n".join(model.requests[0].system)


def test_a_slow_on_write_does_not_stall_other_runs(engine, gate: Gate, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from lev_nb.blueprint import load

    folder = tmp_path / "agent"
    (folder / "context_hooks").mkdir(parents=True)
    (folder / "context_hooks" / "board.rhai").write_text('fn render(ctx) { "BOARD" }\nfn on_write(ctx) { () }')
    (folder / "agent.leviath").write_text(textwrap.dedent("""
        [agent]
        name = "slow-write"
        [context.regions.board]
        kind = "custom"
        script = "context_hooks/board.rhai"
        max_tokens = 1000
        [context.regions.conversation]
        kind = "sliding_window"
        max_tokens = 5000
        [stages.work]
        available_tools = ["context_append"]
        nudge = { enabled = false }
        [stages.work.transitions]
        """))
    original = RegionScript.on_write

    def slow_on_write(self: RegionScript, ctx: Any) -> Any:
        gate.hold()
        return original(self, ctx)

    monkeypatch.setattr(RegionScript, "on_write", slow_on_write)
    run_a, _ = engine.start(load(folder), [call("context_append", region="board", content="x"), say("done")])
    _quick_run_finishes_while_held(engine, run_a, gate)
    # A tool result routed into the region goes through on_write too, off the engine thread.
    gate.entered.clear()
    gate.released.clear()
    routed = (folder / "agent.leviath").read_text().replace(
        'available_tools = ["context_append"]',
        'available_tools = ["list_dir"]\ntool_routing = { default_region = "board" }')
    (folder / "agent.leviath").write_text(routed)
    run_a, _ = engine.start(load(folder), [call("list_dir", path="."), say("done")])
    _quick_run_finishes_while_held(engine, run_a, gate)


def test_one_runs_blocking_calls_leave_threads_for_another(engine, gate: Gate, monkeypatch: pytest.MonkeyPatch) -> None:
    # 40 blocking reads in one turn used to take every one of the engine's 32 worker threads.
    original = builtin._read_one

    def read_one(ctx: Any, path: str, cap: int) -> str:
        if path.startswith("held"):
            gate.hold()
        return original(ctx, path, cap)

    monkeypatch.setattr(builtin, "_read_one", read_one)
    many = calls(*[("read_file", {"path": f"held-{i}.txt"}) for i in range(40)])
    run_a, _ = engine.start(QUIET_WORK_STAGE.replace('["list_dir"]', '["read_file"]'), [many, say("done")])
    _quick_run_finishes_while_held(engine, run_a, gate)
    assert gate.held == 40  # every call ran, BLOCKING_PER_RUN at a time
    assert BLOCKING_PER_RUN < 32



WAITS_FOR_APPROVAL = '[stages.work]\navailable_tools = ["write_file"]\nnudge = { enabled = false }\n[stages.work.transitions]\n'
WAITING_RUNS = 40  # more than the engine's 32 shared worker threads


def _forty_waiting_runs_leave_list_dir_alone(engine, **kw: Any) -> list[Any]:
    waiting = [
        engine.start(WAITS_FOR_APPROVAL, [call("write_file", path=f"f{i}.txt", content="x"), say("ok")], **kw)[0]
        for i in range(WAITING_RUNS)
    ]
    return waiting


def test_runs_waiting_for_a_person_s_approval_hold_no_worker_thread(engine) -> None:
    """Issue 12 item 7 follow-up: 40 runs each waiting for an approval (the interaction hub's wait)
    do not stop a 41st run's list_dir."""
    from support import next_request

    waiting = _forty_waiting_runs_leave_list_dir_alone(engine, interactive=True)
    requests = [next_request(run) for run in waiting]
    run_b, _ = engine.run(QUIET_WORK_STAGE, [call("list_dir", path="."), say("done")])
    assert run_b.status == "complete", run_b.error
    assert all(not run.done() for run in waiting)
    for run, request in zip(waiting, requests):
        run.respond(request.id, "deny")
    for run in waiting:
        run.wait(RUN_TIMEOUT_S)
        assert run.status == "complete", run.error


def test_a_launch_approver_waiting_for_a_person_holds_no_shared_worker_thread(engine) -> None:
    """A plain (blocking) approver given at launch waits on a thread of its own, not on one of the
    engine's shared worker threads: 40 of them waiting do not stop a 41st run's list_dir."""
    person = threading.Event()
    asked = threading.Semaphore(0)

    def approver(tool: str, arguments: dict[str, Any]) -> bool:
        asked.release()
        assert person.wait(RUN_TIMEOUT_S), "never answered"
        return False

    try:
        waiting = _forty_waiting_runs_leave_list_dir_alone(engine, approver=approver)
        for _ in waiting:
            assert asked.acquire(timeout=RUN_TIMEOUT_S)
        run_b, _ = engine.run(QUIET_WORK_STAGE, [call("list_dir", path="."), say("done")])
        assert run_b.status == "complete", run_b.error
        assert all(not run.done() for run in waiting)
    finally:
        person.set()
    for run in waiting:
        run.wait(RUN_TIMEOUT_S)
        assert run.status == "complete", run.error


# -- every write into a custom region runs its on_write off the engine thread ----------------------
BOARD_SCRIPT = 'fn render(ctx) { "BOARD" }\nfn on_write(ctx) { () }'


def scripted_agent(tmp_path: Path, body: str, files: dict[str, str] | None = None) -> Any:
    """An agent folder whose custom regions use context_hooks/board.rhai (on_write does nothing)."""
    from lev_nb.blueprint import load

    folder = tmp_path / "agent"
    (folder / "context_hooks").mkdir(parents=True)
    (folder / "context_hooks" / "board.rhai").write_text(BOARD_SCRIPT)
    for name, text in (files or {}).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    (folder / "agent.leviath").write_text('[agent]\nname = "slow-writes"\n' + textwrap.dedent(body))
    return load(folder)


@pytest.fixture
def slow_writes(gate: Gate, monkeypatch: pytest.MonkeyPatch) -> Gate:
    """on_write holds a write whose entry says SLOW (or is a runtime nudge) until the gate opens."""
    original = RegionScript.on_write

    def slow_on_write(self: RegionScript, ctx: Any) -> Any:
        content = ctx["entry"]["content"]
        if "SLOW" in content or content.startswith("[System]"):
            gate.hold()
        return original(self, ctx)

    monkeypatch.setattr(RegionScript, "on_write", slow_on_write)
    return gate


BOARD = """
[context.regions.board]
kind = "custom"
script = "context_hooks/board.rhai"
max_tokens = 1000
{extra}
"""
CONVERSATION = """
[context.regions.conversation]
kind = "sliding_window"
max_tokens = 5000
"""


def test_a_slow_on_write_of_a_seed_does_not_stall_other_runs(engine, slow_writes: Gate, tmp_path: Path) -> None:
    seeded = BOARD.format(extra='seed = { literal = "SLOW seed" }')
    bp = scripted_agent(tmp_path, seeded + CONVERSATION + QUIET_WORK_STAGE)
    run_a, _ = engine.start(bp, [say("done")])
    _quick_run_finishes_while_held(engine, run_a, slow_writes)


def test_a_slow_on_write_of_a_hook_modification_does_not_stall_other_runs(
    engine, slow_writes: Gate, tmp_path: Path
) -> None:
    hook = 'fn on_stage_enter(ctx) { #{action: "modify", value: #{board: "SLOW from the hook"}} }'
    body = BOARD.format(extra="") + CONVERSATION + QUIET_WORK_STAGE.replace(
        "[stages.work.transitions]", '[stages.work.hooks]\non_stage_enter = "hooks/h.rhai"\n[stages.work.transitions]')
    run_a, _ = engine.start(scripted_agent(tmp_path, body, {"hooks/h.rhai": hook}), [say("done")])
    _quick_run_finishes_while_held(engine, run_a, slow_writes)
    assert [e.target for e in run_a.events.snapshot() if e.kind == "hook_modified"] == ["region:board"]


def test_a_slow_on_write_of_a_nudge_does_not_stall_other_runs(engine, slow_writes: Gate, tmp_path: Path) -> None:
    body = """
    [context.regions.conversation]
    kind = "custom"
    script = "context_hooks/board.rhai"
    max_tokens = 5000
    [stages.work]
    available_tools = ["list_dir"]
    [stages.work.transitions]
    """
    run_a, _ = engine.start(scripted_agent(tmp_path, body), [say("thinking first"), call("list_dir", path="."), say("done")])
    _quick_run_finishes_while_held(engine, run_a, slow_writes)
    assert [e.kind for e in run_a.events.snapshot()].count("nudge") == 1


def test_a_slow_on_write_of_a_compaction_summary_does_not_stall_other_runs(
    engine, slow_writes: Gate, tmp_path: Path
) -> None:
    from support import FnModel

    body = BOARD.format(extra='seed = { literal = "first notes" }') + CONVERSATION + """
    [stages.draft]
    nudge = { enabled = false }
    [stages.draft.transitions.review]
    transform = "compact"
    [stages.review]
    nudge = { enabled = false }
    [stages.review.transitions]
    """
    model = FnModel(lambda request: say("SLOW summary") if request.purpose == "summary" else say("done"))
    run_a, _ = engine.start(scripted_agent(tmp_path, body), model)
    _quick_run_finishes_while_held(engine, run_a, slow_writes)
    assert [r.purpose for r in model.requests].count("summary") >= 1


def test_a_slow_on_write_of_a_checkpoint_document_does_not_stall_other_runs(
    engine, slow_writes: Gate, tmp_path: Path
) -> None:
    from support import next_request

    body = BOARD.format(extra="") + CONVERSATION + """
    [stages.plan]
    mode = "interactive_points"
    nudge = { enabled = false }
    [[stages.plan.interaction_points]]
    name = "approve_plan"
    prompt = "Approve the plan?"
    options = ["Approve"]
    document_region = "board"
    [stages.plan.transitions]
    """
    run_a, _ = engine.start(scripted_agent(tmp_path, body), [say("SLOW plan")], interactive=True)
    assert slow_writes.entered.wait(RUN_TIMEOUT_S)  # the plan is being written into the board
    run_b, _ = engine.run(QUIET_WORK_STAGE, [call("list_dir", path="."), say("done")])
    assert run_b.status == "complete", run_b.error
    assert not run_a.done()
    slow_writes.release()
    run_a.respond(next_request(run_a).id, "Approve")
    run_a.wait(RUN_TIMEOUT_S)
    assert run_a.status == "complete", run_a.error
