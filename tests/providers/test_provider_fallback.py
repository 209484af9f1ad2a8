"""A stage's ``models`` list tried in order when a model is unusable (spec/runtime.md §13.3), against
the Messages API stand-in: credits, auth and unknown-model answers move to the next model with a
``model_fallback`` event; credits or an unreachable provider with nothing left stop the run with
what to set up (status paused, resumable); anything else takes the error edge."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from standin import API_KEY, Recorded, Reply, StandIn, error_body, message, serve, text

from lev_nb.providers import ProviderError


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    yield from serve()


def two_stages(first: str, *, allow_default: bool = True, error_edge: bool = False) -> str:
    models = ", ".join(f'{{ provider = "anthropic", model = "{m}" }}' for m in first.split(","))
    edge = '[stages.draft.transitions.rescue]\ncondition = "error"\n[stages.draft.transitions.review]\n' if error_edge else ""
    return f"""
[agent]
name = "fallbacks"
[stages.draft]
model = {{ models = [{models}], allow_user_default = {str(allow_default).lower()} }}
nudge = {{ enabled = false }}
{edge}
[stages.review]
model = {{ models = [{models}], allow_user_default = {str(allow_default).lower()} }}
nudge = {{ enabled = false }}
[stages.review.transitions]
[stages.rescue]
model = {{ provider = "anthropic", model = "claude-haiku-4-5" }}
nudge = {{ enabled = false }}
[stages.rescue.transitions]
"""


def by_model(refusals: dict[str, Reply]) -> Callable[[Recorded], Reply]:
    """Refuse the named models, answer every other one."""
    def answer(recorded: Recorded) -> Reply:
        model = recorded.body["model"]
        if model in refusals:
            return refusals[model]
        return Reply(body=message(text(f"answered by {model}"), model=model))
    return answer


def start(toml: str, home: Path, url: str, monkeypatch: pytest.MonkeyPatch, **options: Any) -> Any:
    from lev_nb import load
    from lev_nb.engine.pipeline.inference import RetryPolicy

    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    run = load(toml).run("write", home=home, retry=RetryPolicy(max_attempts=2, base_delay_s=0), **options)
    run.wait(60)
    return run


def of_kind(run: Any, kind: str) -> list[Any]:
    return [e for e in run.events.snapshot() if e.kind == kind]


@pytest.mark.parametrize(
    ("refusal", "reason"),
    [
        (Reply(402, error_body("billing_error", "Your credit balance is too low")), "credits"),
        (Reply(401, error_body("authentication_error", "invalid x-api-key")), "auth"),
        (Reply(403, error_body("permission_error", "this key may not use the model")), "auth"),
        (Reply(404, error_body("not_found_error", "model: claude-opus-4-6")), "unknown model"),
    ],
    ids=["credits", "auth-401", "auth-403", "unknown-model"],
)
def test_an_unusable_model_falls_back_to_the_next_in_the_list(
    stand_in: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refusal: Reply, reason: str
) -> None:
    stand_in.responder = by_model({"claude-opus-4-6": refusal})
    run = start(two_stages("claude-opus-4-6,claude-haiku-4-5"), tmp_path / "home", stand_in.url, monkeypatch)
    assert run.status == "complete", run.error
    [fallback] = of_kind(run, "model_fallback")
    assert (fallback.stage, fallback.from_model, fallback.to_model) == (
        "draft", "anthropic/claude-opus-4-6", "anthropic/claude-haiku-4-5")
    assert fallback.reason.startswith(f"{reason}: HTTP")
    [told] = run.warnings  # the person hears of it, once
    assert told.code == "model-fallback" and told.stage == "draft"
    assert told.message.startswith("stage 'draft' switched from anthropic/claude-opus-4-6 to anthropic/claude-haiku-4-5")
    # The run remembers: the next stage lists the same models and never asks the unusable one again.
    assert [r.body["model"] for r in stand_in.requests] == ["claude-opus-4-6", "claude-haiku-4-5", "claude-haiku-4-5"]
    calls = of_kind(run, "model_call")
    assert [(c.stage, c.model, bool(c.error)) for c in calls] == [
        ("draft", "claude-opus-4-6", True), ("draft", "claude-haiku-4-5", False), ("review", "claude-haiku-4-5", False)]
    assert of_kind(run, "error") == []
    assert run.meta["usage"]["total"]["models"] == {"anthropic/claude-haiku-4-5": 2}  # failed calls bill nothing


def test_the_configured_default_is_the_last_fallback(stand_in: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    refused = Reply(401, error_body("authentication_error", "no"))
    stand_in.responder = by_model({"claude-opus-4-6": refused, "claude-haiku-4-5": refused})
    run = start(two_stages("claude-opus-4-6,claude-haiku-4-5"), tmp_path / "home", stand_in.url, monkeypatch)
    assert run.status == "complete", run.error
    assert [(f.from_model, f.to_model) for f in of_kind(run, "model_fallback")] == [
        ("anthropic/claude-opus-4-6", "anthropic/claude-haiku-4-5"),
        ("anthropic/claude-haiku-4-5", "anthropic/claude-sonnet-4-6")]


def test_credits_with_no_fallback_left_pause_the_run_saying_what_to_set_up(
    stand_in: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in.responder = by_model({"claude-opus-4-6": Reply(402, error_body("billing_error", "out of credits"))})
    toml = two_stages("claude-opus-4-6", allow_default=False, error_edge=True)
    run = start(toml, tmp_path / "home", stand_in.url, monkeypatch)
    assert run.status == "paused" and run.error is None
    assert "out of credits or quota" in run.pause_reason and f"lev resume {run.run_id}" in run.pause_reason
    assert "top up the account" in run.pause_reason
    assert run.stage_history == ["draft"]  # the error edge is not taken: another stage would fail the same way
    meta = json.loads((Path(run.run_dir) / "meta.json").read_text())
    assert meta["status"] == "paused" and meta["needs_setup"]["blocker"] == "credits"
    assert meta["needs_setup"]["reason"] == run.pause_reason
    [paused] = of_kind(run, "paused")
    assert (paused.stage, paused.blocker) == ("draft", "credits")
    assert of_kind(run, "completed") == []  # not an end
    assert len(stand_in.requests) == 1  # credits are not retried


def test_an_unreachable_provider_is_retried_then_pauses_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago and has no listener now
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    toml = two_stages("claude-opus-4-6", allow_default=False, error_edge=True)
    run = start(toml, tmp_path / "home", f"http://127.0.0.1:{port}", monkeypatch)
    assert run.status == "paused"
    assert "could not be reached" in run.pause_reason and "lev resume" in run.pause_reason
    assert [r.attempt for r in of_kind(run, "model_retry")] == [1]
    assert run.meta["needs_setup"]["blocker"] == "providers"


def test_auth_with_no_fallback_left_takes_the_error_edge(
    stand_in: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in.responder = by_model({"claude-opus-4-6": Reply(401, error_body("authentication_error", "bad key"))})
    run = start(two_stages("claude-opus-4-6", allow_default=False, error_edge=True), tmp_path / "home",
                stand_in.url, monkeypatch)
    assert run.status == "complete", run.error
    assert run.stage_history == ["draft", "rescue"]
    assert run.meta["needs_setup"] is None
    assert of_kind(run, "model_fallback") == []


def test_other_errors_never_fall_back(stand_in: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = Reply(400, error_body("invalid_request_error", "max_tokens: too large"))
    stand_in.responder = by_model({"claude-opus-4-6": bad})
    run = start(two_stages("claude-opus-4-6,claude-haiku-4-5", error_edge=True), tmp_path / "home",
                stand_in.url, monkeypatch)
    assert run.stage_history == ["draft", "rescue"]
    assert of_kind(run, "model_fallback") == []


def test_a_model_fixed_at_launch_has_no_fallback(stand_in: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stand_in.responder = by_model({"claude-opus-4-6": Reply(402, error_body("billing_error", "no credits"))})
    run = start(two_stages("claude-opus-4-6,claude-haiku-4-5"), tmp_path / "home", stand_in.url, monkeypatch,
                model="anthropic/claude-opus-4-6")
    assert run.status == "paused" and "out of credits" in run.pause_reason
    assert {r.body["model"] for r in stand_in.requests} == {"claude-opus-4-6"}


def test_the_unusable_reasons_by_error_kind() -> None:
    assert ProviderError("credits", "x").unusable_reason == "credits"
    assert ProviderError("auth", "x").unusable_reason == "auth"
    assert ProviderError("unknown_model", "x").unusable_reason == "unknown model"
    assert ProviderError("transport", "x").unusable_reason == "unreachable"
    assert ProviderError("server", "x").unusable_reason is None
    assert ProviderError("api", "HTTP 400: x").unusable_reason is None
