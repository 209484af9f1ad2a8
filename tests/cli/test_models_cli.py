"""``lev models list|show`` (cli.md) and what ``lev validate`` says about models: the static
catalogue with corrections, ``--remote`` against a Chat Completions stand-in's ``/v1/models``, a
Rhai provider script's ``list_models``, exit statuses, the "Models this install would use" lines
and the ``no-reachable-provider`` lint."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from chat_standin import ChatStandIn, Reply, model_list, serve_chat
from support import Lev

PACKAGE_EXAMPLE = Path(__file__).resolve().parents[2] / "lev_nb" / "providers" / "examples" / "openai_compatible.rhai"


@pytest.fixture
def chat() -> Iterator[ChatStandIn]:
    yield from serve_chat()


def test_list_shows_the_configured_providers_catalogue(lev: Lev, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    out = lev("models", "list")
    assert out.returncode == 0, out.stderr
    assert "openai\n" in out.stdout and "gpt-4.1" in out.stdout and "$2/$8 per Mtok" in out.stdout
    assert "anthropic" not in out.stdout  # no key for it here
    every = lev("models", "list", "--all")
    assert "anthropic  (no key here)" in every.stdout and "claude-sonnet-4-6" in every.stdout
    # A provider the catalogue knows but this install has no key for: an empty table, exit 0.
    monkeypatch.delenv("OPENAI_API_KEY")
    named = lev("models", "list", "-p", "openai")
    assert named.returncode == 0 and "openai  (no key here)" in named.stdout and "gpt-4.1" not in named.stdout
    # A provider that names nothing: exit 1.
    missing = lev("models", "list", "-p", "groq")
    assert missing.returncode == 1 and "no provider named 'groq'" in missing.stderr


def test_list_remote_asks_an_openai_compatible_server(lev: Lev, chat: ChatStandIn, monkeypatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", chat.url)
    chat.queue(Reply(body=model_list("qwen3:8b", "llama3.2:3b")))
    out = lev("models", "list", "-p", "ollama", "--remote")
    assert out.returncode == 0, out.stderr
    assert "qwen3:8b" in out.stdout and "llama3.2:3b" in out.stdout
    assert chat.requests[0].path == "/v1/models"
    chat.queue(Reply(500, {"error": {"message": "down"}}))
    failed = lev("models", "list", "-p", "ollama", "--remote")
    assert failed.returncode == 1 and "cannot list" in failed.stderr


def test_show_prints_what_a_run_will_use_with_corrections(lev: Lev, home: Path, chat: ChatStandIn,
                                                          monkeypatch) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[model_capabilities."qwen3:8b"]\nmax_context_tokens = 40960\n'
                                      'supports_tools = false\n')
    out = lev("models", "show", "ollama/qwen3:8b")
    assert out.returncode == 0, out.stderr
    assert "context window: 40960 tokens" in out.stdout and "tools: no" in out.stdout
    assert "corrected by [model_capabilities]: max_context_tokens, supports_tools" in out.stdout
    data = json.loads(lev("models", "show", "gpt-4o", "--json").stdout)  # a bare id the catalogue knows
    assert data["provider"] == "openai" and data["max_context_tokens"] == 128000 and data["configured"] is False
    monkeypatch.setenv("OLLAMA_HOST", chat.url)
    chat.responder = lambda r: Reply(body=model_list("llama3.2:3b"))
    remote = lev("models", "show", "ollama/qwen3:8b", "--remote")
    assert remote.returncode == 1 and "NO - the server does not offer it" in remote.stdout


def test_a_provider_script_is_always_asked_for_its_models(lev: Lev, home: Path, chat: ChatStandIn) -> None:
    (home / "providers").mkdir(parents=True)
    shutil.copy(PACKAGE_EXAMPLE, home / "providers" / "lab.rhai")
    (home / "config.toml").write_text(
        f'[model_providers.lab]\nbase_url = "{chat.url}/v1"\n[model_providers.lab.options]\napi_key = "k"\n'
        "[security]\nallow_local_network = true\n")
    chat.responder = lambda r: Reply(body=model_list("lab-small", "lab-large"))
    out = lev("models", "list", "-p", "lab")
    assert out.returncode == 0, out.stderr
    assert "lab-small" in out.stdout and "lab-large" in out.stdout


AGENT = """
[agent]
name = "picky"
[stages.draft]
model = { models = [{ provider = "anthropic", model = "claude-sonnet-4-6" }, { provider = "openai", model = "gpt-4.1" }] }
[stages.draft.transitions.check]
[stages.check]
model = { provider = "anthropic", model = "claude-haiku-4-5" }
[stages.check.transitions]
"""


def test_validate_prints_the_model_each_stage_would_use(lev: Lev, tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "agent.leviath").write_text(AGENT)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    out = lev("validate", str(tmp_path))
    lines = out.stdout.splitlines()
    start = lines.index("Models this install would use:")
    assert lines[start + 1].split() == ["draft", "openai/gpt-4.1"]
    assert "blueprint order: anthropic/claude-sonnet-4-6, openai/gpt-4.1" in lines[start + 2]
    assert lines[start + 3].split()[:2] == ["check", "anthropic/claude-haiku-4-5"]
    assert "(no key here: set ANTHROPIC_API_KEY)" in lines[start + 3]
    assert "default_provider = anthropic, default_model = (unset)" in lines[start + 4]
    # The check stage names only a provider this install cannot reach; draft has openai.
    findings = json.loads(lev("validate", "--json", str(tmp_path)).stdout)["findings"]
    unreachable = [f for f in findings if f["code"] == "no-reachable-provider"]
    assert [f.get("stage") for f in unreachable] == ["check"]
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    findings = json.loads(lev("validate", "--json", str(tmp_path)).stdout)["findings"]
    assert not [f for f in findings if f["code"] == "no-reachable-provider"]


@pytest.mark.parametrize(("config", "says"), [
    ("", "names no provider this install can reach (tried anthropic), nor your default model "
         "(anthropic/claude-sonnet-4-6) or a [providers] fallback_order entry, so it cannot start until one of "
         "them is configured"),
    ('default_provider = "openai"\ndefault_model = "gpt-4.1"\n',
     "names no provider this install can reach (tried anthropic), so it falls back to your default model "
     "(openai/gpt-4.1)"),
    ('[providers]\nfallback_order = ["openai/gpt-4.1-mini"]\n',
     "names no provider this install can reach (tried anthropic), nor your default model "
     "(anthropic/claude-sonnet-4-6), so it falls back to openai/gpt-4.1-mini from [providers] fallback_order"),
])
def test_no_reachable_provider_says_where_the_stage_goes(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        config: str, says: str) -> None:
    import lev_nb

    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(config)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    report = lev_nb.validate(AGENT)
    (finding,) = report.by_code("no-reachable-provider")
    assert finding.stage == "check" and finding.message == says
    # What the lint says is where the run starts: the model the stage's row names, or none usable.
    (row,) = [r for r in report.models["stages"] if r["stage"] == "check"]
    assert (row["missing_key"] is None) == ("falls back" in says)


def test_no_reachable_provider_with_no_fallback_allowed(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import lev_nb

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    strict = AGENT.replace('model = "claude-haiku-4-5" }', 'model = "claude-haiku-4-5", allow_user_default = false }')
    (finding,) = lev_nb.validate(strict).by_code("no-reachable-provider")
    assert finding.message == ("names no provider this install can reach (tried anthropic), and allow_user_default "
                               "= false forbids a fallback, so it cannot start")


def test_validate_json_carries_each_stages_model(lev: Lev, tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "agent.leviath").write_text(AGENT)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    models = json.loads(lev("validate", "--json", str(tmp_path)).stdout)["models"]
    assert models == {
        "default_provider": "anthropic", "default_model": None,
        "stages": [
            {"stage": "draft", "model": "openai/gpt-4.1", "missing_key": None, "refused": None,
             "blueprint_order": ["anthropic/claude-sonnet-4-6", "openai/gpt-4.1"]},
            {"stage": "check", "model": "anthropic/claude-haiku-4-5", "missing_key": "ANTHROPIC_API_KEY",
             "refused": None, "blueprint_order": ["anthropic/claude-haiku-4-5"]},
        ],
    }
    # A blueprint refused before linting has no models to show.
    (tmp_path / "agent.leviath").write_text("[agent]\nname = 'x'\n[stages.a]\nbogus = 1\n")
    assert json.loads(lev("validate", "--json", str(tmp_path)).stdout)["models"] is None


def test_the_python_api_gives_what_lev_validate_gives(lev: Lev, tmp_path: Path, monkeypatch) -> None:
    import lev_nb

    (tmp_path / "agent.leviath").write_text(AGENT)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    report = lev_nb.validate(tmp_path)
    assert [f.stage for f in report.by_code("no-reachable-provider")] == ["check"]
    assert report.to_dict() == json.loads(lev("validate", "--json", str(tmp_path)).stdout)
    assert [row["model"] for row in report.models["stages"]] == ["openai/gpt-4.1", "anthropic/claude-haiku-4-5"]


def test_lev_config_never_prints_a_key_written_in_the_file(lev: Lev, home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('openrouter_api_key = "sk-or-secret-1"\n[providers]\nopenai_api_key = "sk-secret-2"\n'
                                      '[model_providers.lab]\nbase_url = "http://x/v1"\napi_key = "sk-secret-3"\n')
    for args in (("config",), ("config", "--json")):
        out = lev(*args)
        assert out.returncode == 0, out.stderr
        assert "secret" not in out.stdout and "(set; hidden)" in out.stdout


def test_a_stage_without_a_model_block_is_not_called_unreachable(tmp_path: Path, home: Path) -> None:
    import lev_nb

    bare = "[agent]\nname = 'bare'\n[stages.only]\nmode = 'output'\nmax_iterations = 3\n[stages.only.transitions]\n"
    report = lev_nb.validate(bare)  # no key anywhere: the default model is not reachable either
    assert report.codes.count("stage-missing-model") == 1
    assert not report.by_code("no-reachable-provider")  # stage-missing-model already says where it runs
    assert report.models["stages"][0]["missing_key"] == "ANTHROPIC_API_KEY"
