"""Model-call failures: error edges, runs ending in error, transient retries, crashing providers."""

from __future__ import annotations

import json
from pathlib import Path

from support import call, events_of, fail, purposes, request_text, say

from lev_nb.engine.pipeline.inference import RetryPolicy
from lev_nb.messages import ModelRequest, ModelResponse, ToolCall

WITH_ERROR_EDGE = """
[stages.work]
available_tools = ["list_dir"]
[stages.work.transitions.done]
hint = "finished"
[stages.work.transitions.recover]
condition = "error"
[stages.done]
[stages.done.transitions]
[stages.recover]
available_tools = ["list_dir"]
[stages.recover.transitions]
"""

NO_ERROR_EDGE = """
[stages.work]
available_tools = ["list_dir"]
[stages.work.transitions]
"""


def test_provider_error_takes_the_error_edge_with_a_note(engine):
    run, model = engine.run(
        WITH_ERROR_EDGE, [fail("auth", "key rejected"), call("list_dir"), say("recovered")]
    )
    assert run.status == "complete", run.error
    assert run.stage_history == ["work", "recover"]
    transition = events_of(run, "transition")[0]
    assert (transition.target, transition.condition) == ("recover", "error")
    assert [e.message for e in events_of(run, "error")] == ["key rejected"]
    note = request_text(model.requests[1])
    assert "[Error in stage 'work']" in note and "key rejected" in note
    assert run.meta["iteration"] == 2  # the failed call did not count


def test_provider_error_without_error_edge_ends_the_run_with_the_message(engine):
    run, _ = engine.run(NO_ERROR_EDGE, [fail("auth", "key rejected")])
    assert run.status == "error"
    assert "key rejected" in run.error
    assert "work" in run.error
    meta = json.loads((Path(run.run_dir) / "meta.json").read_text())
    assert meta["status"] == "error" and "key rejected" in meta["error"]
    assert events_of(run, "completed")[0].status == "error"


def test_exhausted_script_is_a_provider_error(engine):
    run, _ = engine.run(NO_ERROR_EDGE, [call("list_dir")])
    assert run.status == "error"
    assert "script exhausted" in run.error


def test_routing_call_failure_takes_the_error_edge(engine):
    toml = """
    [stages.hub]
    available_tools = ["list_dir"]
    [stages.hub.transitions.a]
    hint = "a"
    [stages.hub.transitions.b]
    hint = "b"
    [stages.hub.transitions.fix]
    condition = "error"
    [stages.a]
    [stages.a.transitions]
    [stages.b]
    [stages.b.transitions]
    [stages.fix]
    available_tools = ["list_dir"]
    [stages.fix.transitions]
    """
    run, model = engine.run(toml, [call("list_dir"), say("done"), fail("api", "bad request"), call("list_dir"), say("ok")])
    assert run.status == "complete", run.error
    assert purposes(model)[:3] == ["stage", "stage", "routing"]
    assert run.stage_history == ["hub", "fix"]


def test_transient_errors_are_retried_per_policy(engine):
    turns = [fail("server", "HTTP 529 overloaded"), fail("rate_limited", "slow down"), call("list_dir"), say("ok")]
    run, model = engine.run(NO_ERROR_EDGE, turns, retry=RetryPolicy(max_attempts=3, base_delay_s=0))
    assert run.status == "complete", run.error
    retries = events_of(run, "model_retry")
    assert [(r.attempt, r.max_attempts) for r in retries] == [(1, 3), (2, 3)]
    assert "HTTP 529 overloaded" in retries[0].reason and "slow down" in retries[1].reason
    assert len(model.requests) == 4
    assert events_of(run, "error") == []


def test_transient_errors_beyond_the_budget_fail_the_stage(engine):
    turns = [fail("server", "e1"), fail("server", "e2"), fail("server", "e3")]
    run, model = engine.run(NO_ERROR_EDGE, turns, retry=RetryPolicy(max_attempts=2, base_delay_s=0))
    assert run.status == "error"
    assert "e2" in run.error
    assert len(model.requests) == 2


def test_permanent_errors_are_not_retried(engine):
    turns = [fail("auth", "bad key"), say("never reached")]
    run, model = engine.run(NO_ERROR_EDGE, turns, retry=RetryPolicy(max_attempts=4, base_delay_s=0))
    assert run.status == "error"
    assert len(model.requests) == 1


class CrashingModel:
    """A provider with a bug: it raises a plain exception instead of a ProviderError."""

    name = "crashing"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        raise RuntimeError("provider bug")


def test_crashing_provider_ends_in_error_with_a_readable_record(engine):
    run, _ = engine.run(NO_ERROR_EDGE, CrashingModel())
    assert run.status == "error"
    assert "RuntimeError: provider bug" in run.error
    assert "internal error" not in run.error
    assert len(events_of(run, "model_call")) == 1
    meta = json.loads((Path(run.run_dir) / "meta.json").read_text())
    assert meta["status"] == "error"
    assert "provider bug" in meta["error"]
    assert meta["stage_history"] == ["work"]
    assert run.events.closed


def test_crashing_provider_is_caught_by_an_error_edge(engine):
    class CrashOnce(CrashingModel):
        calls = 0

        async def complete(self, request):
            self.calls += 1
            if self.calls == 1:
                raise ValueError("bad state")
            return ModelResponse(text="recovered") if self.calls > 2 else ModelResponse(
                tool_calls=[ToolCall("c1", "list_dir", {})]
            )

    run, _ = engine.run(WITH_ERROR_EDGE, CrashOnce())
    assert run.status == "complete", run.error
    assert run.stage_history == ["work", "recover"]
