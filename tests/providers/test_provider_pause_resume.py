"""Against the Messages API stand-in: a run paused by a credits answer is resumed once the account is
topped up (the stand-in answers again), with its conversation as it was; every model's circuit
breaker opens after consecutive unusable failures and closes again; ``[providers] fallback_order``
is the last word of a stage's model list (spec/runtime.md §13.3)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from standin import API_KEY, Recorded, Reply, StandIn, error_body, message, serve, text, tool_use

import lev_nb
from lev_nb.cli.run_status import status_text
from lev_nb.engine.pipeline.inference import RetryPolicy
from lev_nb.providers.base import ProviderError
from lev_nb.providers.circuit import CircuitBreakers
from lev_nb.store import runs_dir

RETRY = RetryPolicy(max_attempts=2, base_delay_s=0)
NO_CREDITS = Reply(402, error_body("billing_error", "Your credit balance is too low"))

AGENT = """
[agent]
name = "topped-up"
[stages.draft]
model = { provider = "anthropic", model = "claude-opus-4-6", allow_user_default = false }
available_tools = ["list_dir"]
nudge = { enabled = false }
[stages.draft.transitions]
"""


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch, home: Path) -> Iterator[StandIn]:
    for server in serve():
        monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        yield server


def start(toml: str, workdir: Path, **kw: Any) -> Any:
    run = lev_nb.load(toml).run("look around", workdir=workdir, retry=RETRY, **kw)
    return run.wait(60)


def of_kind(run: Any, kind: str) -> list[Any]:
    return [e for e in run.events.snapshot() if e.kind == kind]


def test_a_run_paused_by_credits_resumes_after_the_account_is_topped_up(stand_in: StandIn, workdir: Path) -> None:
    (workdir / "notes.txt").write_text("x")
    stand_in.queue(Reply(body=message(tool_use("toolu_1", "list_dir", {"path": "."}), stop="tool_use")), NO_CREDITS)
    run = start(AGENT, workdir)
    assert run.status == "paused", run.error
    assert "out of credits" in run.pause_reason and "Your credit balance is too low" in run.pause_reason
    assert len(stand_in.requests) == 2

    stand_in.responder = lambda recorded: Reply(body=message(text("all looked at")))  # topped up
    resumed = lev_nb.resume(run.run_id, retry=RETRY).wait(60)
    assert resumed.status == "complete", resumed.error
    assert len(stand_in.requests) == 3  # the answered turn is replayed, not asked again
    body = stand_in.requests[2].body
    blocks = [b for m in body["messages"] for b in (m["content"] if isinstance(m["content"], list) else [])]
    assert any(b.get("type") == "tool_use" and b.get("id") == "toolu_1" for b in blocks)
    results = [b for b in blocks if b.get("type") == "tool_result"]
    assert results and "notes.txt" in str(results[0]["content"])
    assert resumed.meta["resumed"]["from"] == ["paused"]
    assert resumed.meta["usage"]["total"]["calls"] == 2  # both answered calls, across both lives


# ------------------------------------------------------------------------------------------------
# Circuit breakers
# ------------------------------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_circuit_opens_after_consecutive_unusable_failures_and_closes_after_a_good_probe() -> None:
    clock = Clock()
    circuits = CircuitBreakers(clock)
    credits = ProviderError("credits", "empty")
    assert not circuits.failure("p/m", ProviderError("api", "HTTP 400: bad"), 3, 60)  # not about the model
    assert circuits.before_call("p/m", 3) is None
    assert not circuits.failure("p/m", credits, 3, 60)
    assert not circuits.failure("p/m", credits, 3, 60)
    assert circuits.failure("p/m", credits, 3, 60)  # the third in a row opens it
    refusal = circuits.before_call("p/m", 3)
    assert refusal is not None and refusal.error.kind == "credits" and refusal.error.unusable_reason == "credits"
    assert "p/m is not called for another 60 s: it failed 3 times in a row (last: empty)" == refusal.error.message
    assert circuits.before_call("other/m", 3) is None  # per provider/model
    clock.now += 61
    assert circuits.before_call("p/m", 3) is None  # one probe goes through ...
    assert circuits.before_call("p/m", 3) is not None  # ... and only one
    assert circuits.failure("p/m", credits, 3, 60)  # a failed probe opens it again
    assert circuits.before_call("p/m", 3) is not None
    clock.now += 61
    assert circuits.before_call("p/m", 3) is None
    circuits.success("p/m")  # a good probe closes it
    assert circuits.before_call("p/m", 3) is None and circuits.before_call("p/m", 3) is None


def test_a_success_resets_the_count() -> None:
    circuits = CircuitBreakers(Clock())
    credits = ProviderError("credits", "empty")
    circuits.failure("p/m", credits, 2, 60)
    circuits.success("p/m")
    assert not circuits.failure("p/m", credits, 2, 60)
    assert circuits.before_call("p/m", 2) is None


TWO_MODELS = """
[agent]
name = "breakers"
[stages.draft]
model = { models = [{ provider = "anthropic", model = "claude-opus-4-6" }, { provider = "anthropic", model = "claude-haiku-4-5" }] }
nudge = { enabled = false }
[stages.draft.transitions]
"""


def by_model(refused: dict[str, Reply]) -> Any:
    def answer(recorded: Recorded) -> Reply:
        model = recorded.body["model"]
        return refused.get(model) or Reply(body=message(text(f"answered by {model}"), model=model))
    return answer


def test_an_open_circuit_sends_a_batch_of_runs_to_their_fallback_without_calling_the_dead_model(
    stand_in: StandIn, workdir: Path
) -> None:
    lev_nb.configure(providers={"provider_failures_before_open": 2, "provider_circuit_cooldown_secs": 300})
    stand_in.responder = by_model({"claude-opus-4-6": NO_CREDITS})
    runs = [start(TWO_MODELS, workdir) for _ in range(4)]
    assert all(r.status == "complete" for r in runs), [r.error for r in runs]
    asked = [r.body["model"] for r in stand_in.requests]
    assert asked.count("claude-opus-4-6") == 2  # the third and fourth runs never call it
    assert asked.count("claude-haiku-4-5") == 4
    opened = of_kind(runs[1], "circuit_open")  # the second failure opened it
    assert [(e.model, e.failures, e.cooldown_s) for e in opened] == [("anthropic/claude-opus-4-6", 2, 300.0)]
    for later in runs[2:]:
        [event] = of_kind(later, "circuit_open")
        assert event.model == "anthropic/claude-opus-4-6" and "is not called for another" in event.reason
        [fallback] = of_kind(later, "model_fallback")
        assert fallback.to_model == "anthropic/claude-haiku-4-5" and "is not called for another" in fallback.reason
    assert of_kind(runs[0], "circuit_open") == []


def test_fallback_order_comes_after_the_stage_list_and_the_default(stand_in: StandIn, workdir: Path) -> None:
    lev_nb.configure(providers={"fallback_order": ["anthropic/claude-3-5-haiku", "nowhere/model"]})
    refused = Reply(401, error_body("authentication_error", "no"))
    stand_in.responder = by_model({"claude-opus-4-6": refused, "claude-haiku-4-5": refused, "claude-sonnet-4-6": refused})
    run = start(TWO_MODELS, workdir)
    assert run.status == "complete", run.error
    assert [(f.from_model, f.to_model) for f in of_kind(run, "model_fallback")] == [
        ("anthropic/claude-opus-4-6", "anthropic/claude-haiku-4-5"),
        ("anthropic/claude-haiku-4-5", "anthropic/claude-sonnet-4-6"),  # the configured default
        ("anthropic/claude-sonnet-4-6", "anthropic/claude-3-5-haiku"),  # then fallback_order
    ]


def test_fallback_order_is_not_used_by_a_stage_that_allows_only_its_own_models(stand_in: StandIn, workdir: Path) -> None:
    lev_nb.configure(providers={"fallback_order": ["anthropic/claude-3-5-haiku"]})
    stand_in.responder = by_model({"claude-opus-4-6": NO_CREDITS})
    run = start(AGENT.replace('available_tools = ["list_dir"]', ""), workdir)
    assert run.status == "paused"
    assert {r.body["model"] for r in stand_in.requests} == {"claude-opus-4-6"}


def test_naming_another_model_in_the_blueprint_is_a_remedy_the_resume_follows(
    stand_in: StandIn, workdir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "agent"
    folder.mkdir()
    manifest = folder / "agent.leviath"
    manifest.write_text(AGENT, encoding="utf-8")
    stand_in.responder = by_model({"claude-opus-4-6": NO_CREDITS})
    run = lev_nb.load(folder).run("look around", workdir=workdir, retry=RETRY).wait(60)
    assert run.status == "paused" and "name another model in the stage's list" in run.pause_reason

    manifest.write_text(AGENT.replace(
        'model = { provider = "anthropic", model = "claude-opus-4-6", allow_user_default = false }',
        'model = { models = [{ provider = "anthropic", model = "claude-opus-4-6" }, '
        '{ provider = "anthropic", model = "claude-haiku-4-5" }], allow_user_default = false }'), encoding="utf-8")
    resumed = lev_nb.resume(run.run_id, retry=RETRY).wait(60)
    assert resumed.status == "complete", resumed.error
    assert [r.body["model"] for r in stand_in.requests] == ["claude-opus-4-6", "claude-opus-4-6", "claude-haiku-4-5"]
    [note] = [e for e in of_kind(resumed, "warning") if "changed since the run started" in e.message]
    assert str(manifest) in note.message


# ------------------------------------------------------------------------------------------------
# The stall wait (spec/runtime.md §7.3): every model's circuit open
# ------------------------------------------------------------------------------------------------
def wait_for_event(run: Any, kind: str) -> Any:
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = of_kind(run, kind)
        if found:
            return found[0]
        assert not run.done(), f"the run ended ({run.status}: {run.error}) before a {kind} event"
        time.sleep(0.01)
    raise AssertionError(f"no {kind} event came")


def open_the_only_circuit(stand_in: StandIn, workdir: Path, stall: int) -> None:
    """One run's credits failure opens the circuit of the agent's only model for five minutes."""
    lev_nb.configure(providers={"provider_failures_before_open": 1, "provider_circuit_cooldown_secs": 300},
                     limits={"stall_timeout_secs": stall})
    stand_in.responder = lambda recorded: NO_CREDITS
    first = start(AGENT, workdir)
    assert first.status == "paused" and of_kind(first, "stalled") == []  # a real answer pauses at once
    stand_in.responder = lambda recorded: Reply(body=message(text("answered")))


def test_a_run_whose_every_model_fails_fast_waits_for_a_circuit_to_close_before_pausing(
    stand_in: StandIn, workdir: Path
) -> None:
    from lev_nb.providers.circuit import CIRCUITS

    open_the_only_circuit(stand_in, workdir, stall=60)
    asked = len(stand_in.requests)
    run = lev_nb.load(AGENT).run("look around", workdir=workdir, retry=RETRY)
    stalled = wait_for_event(run, "stalled")
    assert stalled.models == ["anthropic/claude-opus-4-6"] and stalled.wait_s == 60
    assert "waiting up to 60 s" in stalled.reason and "is not called for another" in stalled.reason
    assert run.status == "running" and len(stand_in.requests) == asked  # it waits, without calling
    on_disk = json.loads((runs_dir() / run.run_id / "meta.json").read_text())
    assert on_disk["waiting_on"] == {"reason": "stalled", "models": ["anthropic/claude-opus-4-6"], "wait_s": 60}
    assert status_text(on_disk).startswith("stalled: anthropic/claude-opus-4-6 fail fast")
    CIRCUITS.success("anthropic/claude-opus-4-6")  # another run's probe got through
    run.wait(60)
    assert run.status == "complete", run.error
    assert run.meta["needs_setup"] is None and len(stand_in.requests) == asked + 1
    assert run.meta["waiting_on"] is None


def test_a_stalled_run_can_be_cancelled(stand_in: StandIn, workdir: Path) -> None:
    open_the_only_circuit(stand_in, workdir, stall=600)
    run = lev_nb.load(AGENT).run("look around", workdir=workdir, retry=RETRY)
    wait_for_event(run, "stalled")
    run.cancel()
    run.wait(60)
    assert run.status == "cancelled", run.error


def test_with_the_stall_wait_off_a_run_pauses_at_once(stand_in: StandIn, workdir: Path) -> None:
    open_the_only_circuit(stand_in, workdir, stall=0)
    run = start(AGENT, workdir)
    assert run.status == "paused" and of_kind(run, "stalled") == []
    assert "is not called for another" in run.pause_reason


def test_a_stall_that_outlasts_its_wait_pauses_the_run(stand_in: StandIn, workdir: Path) -> None:
    open_the_only_circuit(stand_in, workdir, stall=1)
    run = start(AGENT, workdir)
    assert run.status == "paused", run.error
    [stalled] = of_kind(run, "stalled")
    assert stalled.wait_s == 1
