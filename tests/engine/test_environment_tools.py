"""The environment tools (issue 24): system_info, locale_info, environment_info, which_command and
runtime_info, called by a model and used as seeds, with the upstream's names and result shapes;
environment_info never shows a credential."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support import call, events_of, say

KEY = "sk-ant-test-0123456789abcdef"
TOOLS = '"system_info", "locale_info", "environment_info", "which_command", "runtime_info"'
STAGE = f"[stages.work]\navailable_tools = [{TOOLS}]\nnudge = {{ enabled = false }}\n[stages.work.transitions]\n"


def _results(engine, *turns, **kw) -> tuple[list[str], object]:
    run, model = engine.run(STAGE, [*turns, say("ok")], interactive=False, **kw)
    assert run.status == "complete", run.error
    results = [b.content for m in model.requests[-1].messages for b in m.blocks() if hasattr(b, "content")
               and getattr(b, "tool_use_id", None)]
    return results, run


def test_system_and_locale_info_answer_with_every_field(engine, workdir: Path, monkeypatch) -> None:
    monkeypatch.setenv("LC_ALL", "de_CH.UTF-8")
    (system, loc), _ = _results(engine, call("system_info"), call("locale_info"))
    info = json.loads(system)
    assert set(info) == {"os", "os_version", "arch", "cpu_count", "hostname", "path_separator", "line_ending",
                         "free_disk_bytes"}
    assert info["os"] == "linux" and info["cpu_count"] == os.cpu_count() and info["path_separator"] == "/"
    assert isinstance(info["free_disk_bytes"], int)
    assert json.loads(loc) == {"locale": "de-CH", "language": "de", "region": "CH"}


def test_environment_info_withholds_credentials(engine, home: Path, workdir: Path, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("BRAVE_API_KEY", "brave-0123456789")
    monkeypatch.setenv("MY_SETTING", f"plain and {KEY} inside")  # a secret's value under an innocent name
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[security]\nallow_env_vars = ["BRAVE_API_KEY"]\n')
    (text,), run = _results(engine, call("environment_info"))
    info = json.loads(text)
    assert set(info) == {"working_directory", "home_dir", "temp_dir", "config_dir", "data_dir", "path",
                         "variables", "withheld_variables"}
    assert info["working_directory"] == str(workdir.resolve())
    assert "ANTHROPIC_API_KEY" in info["withheld_variables"] and "ANTHROPIC_API_KEY" not in info["variables"]
    assert info["variables"]["BRAVE_API_KEY"] == "brave-0123456789"  # the user handed this one over
    assert info["variables"]["MY_SETTING"] == "plain and [redacted] inside"
    assert KEY not in text
    for name in ("events.jsonl", "transcript.jsonl", "context.json"):
        record = Path(run.run_dir) / name
        if record.exists():
            assert KEY not in record.read_text()


def test_which_command(engine) -> None:
    found, missing, pathlike = (json.loads(r) if not r.startswith("[") else r for r in _results(
        engine, call("which_command", command="sh"), call("which_command", command="no-such-program-24"),
        call("which_command", command="/bin/sh"))[0])
    assert found["found"] is True and found["path"].endswith("/sh") and found["command"] == "sh"
    assert missing == {"command": "no-such-program-24", "found": False, "path": None}
    assert pathlike.startswith("[error] which_command")


def test_runtime_info_says_whether_anybody_can_answer(engine) -> None:
    (text,), _ = _results(engine, call("runtime_info"))
    info = json.loads(text)
    assert info["agent"] == "engine-test" and info["stage"] == "work"
    assert info["attended"] is False and info["model"] and isinstance(info["context_tokens"], int)
    assert "max_iterations" in info and "stage_iterations" in info


@pytest.mark.parametrize("seed", [
    '{ tools = ["system_info", "locale_info", "runtime_info", { name = "which_command", args = { command = "sh" } }] }',
])
def test_the_environment_tools_seed_a_region(engine, seed: str) -> None:
    toml = ("[context.regions]\nsystem = { kind = \"pinned\", max_tokens = 4000 }\n"
            f"machine = {{ kind = \"pinned\", max_tokens = 4000, seed = {seed} }}\n"
            "conversation = { kind = \"sliding_window\", max_items = 20, max_tokens = 8000 }\n" + STAGE)
    run, model = engine.run(toml, [say("ok")])
    assert run.status == "complete", run.error
    system = "\n".join(model.requests[0].system)
    assert "[system_info]:" in system and '"os": "linux"' in system
    assert "[locale_info]:" in system and "[runtime_info]:" in system and '"attended"' in system
    assert "[which_command]:" in system and '"found": true' in system
    assert not [e for e in events_of(run, "warning") if "seed" in e.message]
