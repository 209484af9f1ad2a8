"""Issue 12: nothing a blueprint, a provider or a callback does can stall, spin or kill the engine
thread. A stage that makes no model call for many iterations is stuck by definition (runner.py
IDLE_ITERATION_LIMIT); the run loop yields on every iteration."""

from __future__ import annotations

import dataclasses
import threading

import pytest
from support import blueprint, call, events_of, say

from lev_nb.engine import runner as runner_module
from lev_nb.engine.prepare import cached_plan
from lev_nb.providers.scripted import ScriptedModel

REGIONS = """
[context.regions.system]
kind = "pinned"
max_tokens = 2000
[context.regions.notes]
kind = "pinned"
max_tokens = 1000
[context.regions.conversation]
kind = "sliding_window"
max_tokens = 8000
"""

# At its iteration cap the stage makes no more model calls, and the gate (notes still empty) sends
# it round again: one iteration after another with no model call, max_attempts times.
SPINNING = REGIONS + """
[stages.work]
available_tools = ["context_write", "list_dir"]
max_iterations = 1
[stages.work.transitions.review]
gate = {{ require_regions = ["notes"], max_attempts = 2 }}
{extra}
[stages.review]
nudge = {{ enabled = false }}
[stages.review.transitions]
[stages.reassess]
nudge = {{ enabled = false }}
[stages.reassess.transitions]
"""


def spinning(attempts: int, extra: str = "") -> object:
    """The SPINNING blueprint with its gate's max_attempts set past what validation allows (as a
    blueprint built without validation could)."""
    bp = blueprint(SPINNING.format(extra=extra))
    gate = cached_plan(bp).stage("work").transitions[0].gate
    object.__setattr__(gate, "max_attempts", attempts)
    return bp


def test_a_gate_that_spins_its_stage_without_model_calls_ends_the_run_as_stuck(engine):
    run, model = engine.run(spinning(1_000_000), [say("a"), say("r")])
    assert run.status == "error"
    assert "without a model call" in run.error and "stage 'work'" in run.error
    assert len(model.requests) == 1
    # Stopped after the most attempts a valid gate may have, then IDLE_ITERATION_LIMIT idle
    # iterations, not a million (a gate's own attempts, up to that most, are not idle: issue 26).
    from lev_nb.blueprint.constants import MAX_GATE_ATTEMPTS

    assert len(events_of(run, "gate_blocked")) <= MAX_GATE_ATTEMPTS + runner_module.IDLE_ITERATION_LIMIT + 1
    assert [e.reason for e in events_of(run, "stuck")] == [run.error]


def test_an_idle_stage_leaves_by_its_stuck_edge(engine):
    extra = '[stages.work.transitions.reassess]\ncondition = "stuck"\nstuck_after_iterations = 99'
    run, model = engine.run(spinning(1_000_000, extra), [say("a"), say("fresh look")])
    assert run.status == "complete", run.error
    assert run.stage_history == ["work", "reassess"]
    assert "without a model call" in events_of(run, "stuck")[0].reason


def test_cancel_lands_while_a_stage_spins(engine, monkeypatch):
    # No idle limit here: only the loop's yield lets the cancel in before the gate gives way.
    monkeypatch.setattr(runner_module, "IDLE_ITERATION_LIMIT", 10**9)
    blocked = threading.Event()
    run, _ = engine.start(spinning(20_000), [say("a"), say("r")])
    run.subscribe(lambda event: blocked.set() if event.kind == "gate_blocked" else None)
    assert blocked.wait(30)
    run.cancel()
    run.wait(60)
    assert run.status == "cancelled"
    assert len(events_of(run, "gate_blocked")) < 20_000


# ----------------------------------------------------------- item 9: SystemExit, KeyboardInterrupt
ONE_STAGE = """
[stages.work]
available_tools = ["write_file", "list_dir"]
[stages.work.transitions]
"""


class Exiting(ScriptedModel):
    """A provider that raises what a careless library might: SystemExit or KeyboardInterrupt."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__([say("never")])
        self.exc = exc

    async def complete(self, request):  # type: ignore[override]
        raise self.exc


def assert_engine_still_runs(engine) -> None:
    run, _ = engine.run(ONE_STAGE, [call("list_dir"), say("fine")])
    assert run.status == "complete", run.error


@pytest.mark.parametrize("exc", [SystemExit(3), KeyboardInterrupt()], ids=["SystemExit", "KeyboardInterrupt"])
def test_a_provider_raising_systemexit_ends_only_its_run(engine, exc):
    run, _ = engine.run(ONE_STAGE, Exiting(exc))
    assert run.status == "error"
    assert type(exc).__name__ in run.error
    assert_engine_still_runs(engine)


@pytest.mark.parametrize("exc", [SystemExit(3), KeyboardInterrupt()], ids=["SystemExit", "KeyboardInterrupt"])
def test_callbacks_raising_systemexit_do_not_stop_the_engine(engine, exc):
    def boom(*_):
        raise exc

    run, _ = engine.start(ONE_STAGE, [call("write_file", path="a.txt", content="x"), say("ok")],
                          on_complete=boom, approver=boom)
    run.subscribe(boom, replay=False)
    run.wait(60)
    assert run.done() and run.status == "complete", run.error
    assert any("on_complete callback failed" in e.message for e in events_of(run, "warning"))
    assert_engine_still_runs(engine)


def test_a_tool_raising_systemexit_is_a_failed_call(engine, monkeypatch):
    from lev_nb.tools.registry import ToolRegistry

    async def boom(ctx, args):
        raise SystemExit("bye")

    registry_get = ToolRegistry.get

    def get(self, name):
        tool = registry_get(self, name)
        return dataclasses.replace(tool, handler=boom) if tool is not None and name == "list_dir" else tool

    monkeypatch.setattr(ToolRegistry, "get", get)
    run, _ = engine.run(ONE_STAGE, [call("list_dir"), say("ok")])
    assert run.status == "complete", run.error
    assert [e.ok for e in events_of(run, "tool_finished")] == [False]
    assert_engine_still_runs(engine)
