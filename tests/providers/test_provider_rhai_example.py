"""The Rhai provider script shipped as an example (lev_nb/providers/examples/openai_compatible.rhai)
drives a whole run against the Chat Completions stand-in: streamed text and tool-call deltas, the
tool result sent back as a tool message, usage with prefix-cached tokens, and its list_models."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from chat_standin import ChatStandIn, Reply, completion, serve_chat, tool_call

import lev_nb
from lev_nb.engine.pipeline.inference import RetryPolicy

EXAMPLE = Path(lev_nb.__file__).parent / "providers" / "examples" / "openai_compatible.rhai"

AGENT = """
[agent]
name = "scripted-provider"
[stages.look]
model = { provider = "lab", model = "lab-large", allow_user_default = false }
available_tools = ["list_dir"]
nudge = { enabled = false }
[stages.look.transitions]
"""


@pytest.fixture
def chat(home: Path) -> Iterator[ChatStandIn]:
    for server in serve_chat():
        (home / "providers").mkdir(parents=True)
        shutil.copy(EXAMPLE, home / "providers" / "lab.rhai")
        (home / "config.toml").write_text(
            f'[model_providers.lab]\nbase_url = "{server.url}/v1"\napi_key_env = "LAB_KEY"\n'
            "[security]\nallow_local_network = true\n")
        yield server


def test_the_example_script_runs_a_stage_with_streamed_tool_calls(chat: ChatStandIn, home: Path, workdir: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAB_KEY", "lab-secret")
    (workdir / "notes.txt").write_text("x")
    chat.queue(
        Reply(body=completion("Looking.", tool_call("call_1", "list_dir", {"path": "."})), chunk_chars=3),
        Reply(body=completion("Found notes.txt.", usage={"prompt_tokens": 900, "completion_tokens": 6,
                                                          "total_tokens": 906,
                                                          "prompt_tokens_details": {"cached_tokens": 512}})),
    )
    run = lev_nb.load(AGENT).run("look", home=home, workdir=workdir, retry=RetryPolicy(max_attempts=1)).wait(60)
    assert run.status == "complete", run.error
    first, second = (r.body for r in chat.requests)
    assert first["stream"] is True and first["model"] == "lab-large" and first["tools"][0]["function"]["name"] == "list_dir"
    assert chat.requests[0].headers["authorization"] == "Bearer lab-secret"
    assert any(m["role"] == "tool" and m["tool_call_id"] == "call_1" and "notes.txt" in m["content"]
               for m in second["messages"])
    texts = "".join(e.text for e in run.events.snapshot() if e.kind == "model_text")
    assert "Looking." in texts and "Found notes.txt." in texts
    usage = run.meta["usage"]["total"]
    assert usage["cached_tokens"] == 512 and usage["calls"] == 2
