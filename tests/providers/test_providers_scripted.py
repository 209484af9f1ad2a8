"""ScriptedModel and resolve_model: turns in order, per-stage scripts, errors, bad shapes."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from lev_nb.messages import ModelRequest
from lev_nb.providers import MockModel, ModelOverride, ProviderError, ScriptedModel, ScriptFileError, resolve_model


def ask(model, stage: str = "work", purpose: str = "stage"):
    """Send one request to ``model`` and return the response."""
    return asyncio.run(model.complete(ModelRequest(provider="p", model="m", stage=stage, purpose=purpose)))


def test_list_script_answers_in_order_across_purposes():
    model = ScriptedModel([{"text": "one"}, {"text": "two"}, {"text": "three"}])
    answers = [ask(model, purpose=p).text for p in ("stage", "routing", "summary")]
    assert answers == ["one", "two", "three"]


def test_tool_calls_become_ToolCalls_with_deterministic_ids():
    model = ScriptedModel([{"tool_calls": [{"name": "write_file", "arguments": {"path": "a", "content": "x"}}, {"name": "list_dir"}]}])
    response = ask(model)
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("call-0-0", "write_file", {"path": "a", "content": "x"}),
        ("call-0-1", "list_dir", {}),
    ]
    assert response.finish_reason == "tool_use"


def test_per_stage_ids_name_the_stage():
    model = ScriptedModel({"plan": [{"tool_calls": [{"name": "x"}]}], "*": [{"tool_calls": [{"name": "y"}]}]})
    assert [ask(model, "plan").tool_calls[0].id, ask(model, "other").tool_calls[0].id] == ["call-plan-0-0", "call-any-0-0"]


def test_given_tool_call_id_is_kept():
    model = ScriptedModel([{"tool_calls": [{"name": "x", "arguments": {}, "id": "mine"}]}])
    assert ask(model).tool_calls[0].id == "mine"


def test_exhausted_script_raises_exhausted_error():
    model = ScriptedModel([{"text": "only"}])
    ask(model)
    with pytest.raises(ProviderError) as info:
        ask(model)
    assert info.value.kind == "exhausted"
    assert info.value.message == "script exhausted"
    assert info.value.transient is False


@pytest.mark.parametrize(
    ("kind", "transient"),
    [("rate_limited", True), ("server", True), ("transport", True), ("auth", False), ("credits", False), ("api", False)],
)
def test_error_entry_raises_provider_error_of_that_kind(kind, transient):
    model = ScriptedModel([{"error": {"kind": kind, "message": "boom"}}])
    with pytest.raises(ProviderError) as info:
        ask(model)
    assert (info.value.kind, info.value.message, info.value.transient) == (kind, "boom", transient)


def test_api_error_mentioning_overload_is_transient():
    assert ProviderError("api", "HTTP 529: overloaded").transient is True
    assert ProviderError("api", "HTTP 400: bad request").transient is False


def test_error_entry_keeps_retry_after():
    model = ScriptedModel([{"error": {"kind": "rate_limited", "message": "slow down", "retry_after": 7}}])
    with pytest.raises(ProviderError) as info:
        ask(model)
    assert info.value.retry_after == 7


def test_per_stage_script_takes_from_the_stage_list():
    model = ScriptedModel({"plan": [{"text": "p1"}, {"text": "p2"}], "build": [{"text": "b1"}]})
    assert [ask(model, "build").text, ask(model, "plan").text, ask(model, "plan").text] == ["b1", "p1", "p2"]


def test_per_stage_script_falls_back_to_star():
    model = ScriptedModel({"plan": [{"text": "p1"}], "*": [{"text": "any1"}, {"text": "any2"}]})
    assert [ask(model, "review").text, ask(model, "plan").text, ask(model, "other").text] == ["any1", "p1", "any2"]


def test_per_stage_exhaustion_does_not_borrow_from_star():
    model = ScriptedModel({"plan": [{"text": "p1"}], "*": [{"text": "any"}]})
    ask(model, "plan")
    with pytest.raises(ProviderError) as info:
        ask(model, "plan")
    assert info.value.kind == "exhausted"


def test_stage_without_list_and_without_star_is_exhausted():
    model = ScriptedModel({"plan": [{"text": "p1"}]})
    with pytest.raises(ProviderError) as info:
        ask(model, "build")
    assert info.value.kind == "exhausted" and "build" in info.value.message


def test_routing_call_counts_for_its_stage():
    model = ScriptedModel({"plan": [{"text": "work"}, {"text": "build"}], "build": [{"text": "b"}]})
    ask(model, "plan")
    assert ask(model, "plan", purpose="routing").text == "build"


def test_requests_are_recorded():
    model = ScriptedModel([{"text": "a"}, {"text": "b"}])
    ask(model, "s1")
    ask(model, "s2", purpose="routing")
    assert [(r.stage, r.purpose) for r in model.requests] == [("s1", "stage"), ("s2", "routing")]


def test_concurrent_threads_never_share_an_entry():
    model = ScriptedModel([{"text": str(i)} for i in range(200)])
    seen: list[str] = []
    lock = threading.Lock()

    def worker():
        for _ in range(50):
            text = ask(model).text
            with lock:
                seen.append(text)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seen, key=int) == [str(i) for i in range(200)]


def test_usage_from_script_is_used():
    model = ScriptedModel([{"text": "x", "usage": {"prompt_tokens": 11, "completion_tokens": 3}}])
    usage = ask(model).usage
    assert (usage.prompt_tokens, usage.completion_tokens) == (11, 3)


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("not json", "not valid JSON"),
        ('[{"txt": "x"}]', "[0]: unknown key 'txt'"),
        ('[{"text": "ok"}, 5]', "[1]: expected an object"),
        ('[{"tool_calls": [{"arguments": {}}]}]', "[0].tool_calls[0].name"),
        ('[{"tool_calls": [{"name": "x", "arguments": [1]}]}]', "[0].tool_calls[0].arguments"),
        ('[{"error": {"kind": "nope", "message": "m"}}]', "[0].error.kind"),
        ('{"plan": {"text": "x"}}', "['plan']: expected a list"),
        ('"hello"', "expected a list of turns or an object"),
    ],
)
def test_from_file_rejects_bad_shapes_naming_file_and_entry(tmp_path, script, expected):
    path = tmp_path / "turns.json"
    path.write_text(script)
    with pytest.raises(ScriptFileError) as info:
        ScriptedModel.from_file(path)
    assert str(path) in str(info.value)
    assert expected in str(info.value)


def test_from_file_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ScriptFileError, match="not found"):
        ScriptedModel.from_file(tmp_path / "nope.json")


def test_resolve_model_forms(tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps([{"text": "hi"}]))
    assert resolve_model(None) is None
    assert isinstance(resolve_model("mock"), MockModel)
    scripted = resolve_model(f"scripted:{script}")
    assert isinstance(scripted, ScriptedModel) and ask(scripted).text == "hi"
    assert resolve_model("anthropic/claude-sonnet-4-6") == ModelOverride("anthropic", "claude-sonnet-4-6")
    instance = MockModel()
    assert resolve_model(instance) is instance


@pytest.mark.parametrize("spec", ["gpt4", "", "scripted:", "a/"])
def test_resolve_model_rejects_other_strings(spec):
    with pytest.raises(ValueError, match="scripted:FILE"):
        resolve_model(spec)


def test_anthropic_override_fails_only_when_called(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)  # never reach the real API from a test
    override = resolve_model("anthropic/claude-sonnet-4-6")
    with pytest.raises(ProviderError) as info:
        ask(override)
    assert info.value.kind == "auth" and "ANTHROPIC_API_KEY" in info.value.message
    assert info.value.transient is False


def test_mock_override_delegates_to_the_mock():
    override = resolve_model("mock/any")
    assert ask(override, purpose="summary").text.startswith("Mock summary")


def test_unknown_provider_fails_when_called_not_when_looked_up():
    from lev_nb.providers import provider_for

    provider = provider_for("nosuch", "m")
    with pytest.raises(ProviderError) as info:
        ask(provider)
    assert "no provider named 'nosuch'" in info.value.message and info.value.kind == "unknown_model"


def test_a_replayed_call_moves_the_script_on() -> None:
    # Issue 26: a resumed run takes its earlier calls from its journal; the script the run started
    # with is told of each, so it goes on where the run stopped instead of at its first turn.
    from lev_nb.providers.base import Replayable

    model = ScriptedModel({"a": [{"text": "a1"}, {"text": "a2"}], "b": [{"text": "b1"}]})
    assert isinstance(model, Replayable)
    model.replayed(ModelRequest(provider="scripted", model="", system=[], messages=[], stage="a"))
    assert model.remaining("a") == 1 and model.remaining("b") == 1
    assert model.requests == []  # a replayed call was not asked
