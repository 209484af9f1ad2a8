"""The bundled agents accept ``model="openai/..."`` where they accept ``model="anthropic/..."``: each
one's recorded transcript (``scripted.json``) is served by the Chat Completions stand-in through the
real ``openai`` SDK, turn by turn for the stage that asks (read from the request's stable
``prompt_cache_key``), and the run ends with the same answer as the offline replay."""

from __future__ import annotations

import itertools
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chat_standin import ChatStandIn, Recorded, Reply, completion, serve_chat, tool_call
from support import BLUEPRINTS, RUN_TIMEOUT_S

import lev_nb

AGENTS = ["code-fixer", "data-extractor", "notebook-editor", "planner-implementer", "research-brief", "triage"]
TASK_FILES = {"triage": "reports.txt"}


@pytest.fixture
def chat(monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatStandIn]:
    for server in serve_chat():
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        yield server


def transcript_server(script: dict[str, list[dict[str, Any]]]) -> Any:
    """Answer each request with the next recorded turn of the stage it comes from."""
    turns = {stage: list(entries) for stage, entries in script.items()}
    lock = threading.Lock()
    ids = itertools.count(1)

    def answer(recorded: Recorded) -> Reply:
        key = recorded.body.get("prompt_cache_key", "")
        stage = key[len("lev-"):-17]  # lev-<stage>-<16 hex digits>
        with lock:
            queue = turns.get(stage) or turns.get("*") or []
            turn = queue.pop(0) if queue else {"text": "done"}
            calls = [tool_call(f"call_{next(ids)}", c["name"], c.get("arguments", {})) for c in turn.get("tool_calls", [])]
        return Reply(body=completion(turn.get("text", ""), *calls, model="gpt-4.1"))
    return answer


@pytest.mark.parametrize("name", AGENTS)
def test_a_bundled_agent_runs_on_openai(name: str, chat: ChatStandIn, home: Path, tmp_path: Path) -> None:
    folder = BLUEPRINTS / name
    script = json.loads((folder / "scripted.json").read_text(encoding="utf-8"))
    chat.responder = transcript_server(script)
    workdir = tmp_path / "sample"
    if (folder / "sample").is_dir():
        shutil.copytree(folder / "sample", workdir)
    else:
        workdir.mkdir()
    task = (folder / TASK_FILES.get(name, "task.txt")).read_text(encoding="utf-8")
    run = lev_nb.load(folder).run(task, model="openai/gpt-4.1", workdir=workdir, home=home,
                                  allow=["write_file", "edit_file"]).wait(RUN_TIMEOUT_S)
    assert run.status == "complete", run.error
    submits = [c["arguments"] for turns in script.values() for t in turns for c in t.get("tool_calls", [])
               if c["name"] == "submit_output"]
    assert run.result.content == submits[-1]["content"]
    assert set(run.meta["usage"]["total"]["models"]) == {"openai/gpt-4.1"}
