"""A run follows the user's configuration ($LEV_HOME/config.toml): defaults, limits, permission
ceilings, seed commands, read grants and the nudge (spec/blueprint.md §3, spec/runtime.md §4.1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import WORK_STAGE, call, events_of, say

import lev_nb
from lev_nb.engine.launch import LaunchError
from lev_nb.engine.pipeline.inference import model_label
from lev_nb.engine.plan.build import plan_from_blueprint
from lev_nb.messages import ToolResultBlock


@pytest.fixture
def config(home: Path):
    """``config(text)`` writes $LEV_HOME/config.toml for this test."""

    def write(text: str) -> Path:
        home.mkdir(parents=True, exist_ok=True)
        path = home / "config.toml"
        path.write_text(text, encoding="utf-8")
        return path

    return write


def results(model) -> list[str]:
    """Every tool result the model was shown, in order."""
    seen: list[str] = []
    for request in model.requests:
        for message in request.messages:
            for block in message.blocks():
                if isinstance(block, ToolResultBlock) and block.content not in seen:
                    seen.append(block.content)
    return seen


WRITER = """
[tool_permissions]
write_file = "allow"
[stages.work]
available_tools = ["write_file"]
max_iterations = 5
[stages.work.transitions]
"""


def test_a_blueprint_cannot_grant_itself_a_tool_the_machine_asks_about(engine, workdir: Path) -> None:
    run, model = engine.run(WRITER, [call("write_file", path="a.txt", content="x"), say("done")])
    assert run.status == "complete", run.error
    assert results(model)[0].startswith("[denied] Tool 'write_file' needs a person's approval")
    assert not (workdir / "a.txt").exists()


def test_the_configuration_can_allow_it(engine, config, workdir: Path) -> None:
    config('[tool_permissions]\nwrite_file = "allow"\n')
    run, _ = engine.run(WRITER.replace('write_file = "allow"', ""), [call("write_file", path="a.txt", content="x"), say("done")])
    assert (workdir / "a.txt").read_text() == "x"
    assert run.flags["modified_files"] == ["a.txt"]


def test_per_agent_ceilings_and_blueprint_permissions(engine, config, workdir: Path) -> None:
    config('[agent_tool_permissions.engine-test]\nwrite_file = "allow"\n')
    engine.run(WRITER.replace('write_file = "allow"', 'write_file = "deny"'), [call("write_file", path="a.txt", content="x"), say("done")])
    assert not (workdir / "a.txt").exists()  # the blueprint may still tighten
    config("[security]\nallow_blueprint_permissions = true\n")
    engine.run(WRITER, [call("write_file", path="b.txt", content="y"), say("done")])
    assert (workdir / "b.txt").read_text() == "y"


LOOPING = """
[stages.work]
available_tools = ["list_dir"]
[stages.work.transitions]
"""


def test_default_max_iterations_caps_a_stage_that_sets_none(engine, config) -> None:
    config("[limits]\ndefault_max_iterations = 3\n")
    run, model = engine.run(LOOPING, [call("list_dir", path=".")] * 10)
    hit = events_of(run, "max_iterations")
    assert hit and hit[0].limit == 3
    assert len([r for r in model.requests if r.purpose == "stage"]) == 3


def test_default_max_iterations_zero_means_unlimited(engine, config) -> None:
    config("[limits]\ndefault_max_iterations = 0\n")
    run, _ = engine.run(LOOPING, [call("list_dir", path=".")] * 60 + [say("done")])
    assert run.status == "complete" and not events_of(run, "max_iterations")


def test_the_default_model_labels_a_stage_with_no_model(engine, config) -> None:
    config('default_provider = "anthropic"\ndefault_model = "claude-haiku-4-5"\n')
    run, _ = engine.run(LOOPING, [say("done")])
    assert run.meta["model"] == "scripted"  # a launch model wins
    bp = lev_nb.load('[agent]\nname = "x"\n[stages.work]\n')
    plan = plan_from_blueprint(bp)
    assert model_label(None, plan.stage("work"), lev_nb.config()) == "anthropic/claude-haiku-4-5"
    # No key in tests: the run is refused before it exists, naming the stage and the variable.
    with pytest.raises(LaunchError, match="ANTHROPIC_API_KEY is not set, and stage 'work' of blueprint 'x'"):
        bp.run("t", model=None, home=engine.home, workdir=engine.workdir)


SEEDED = """
[context.regions]
listing = { kind = "pinned", max_tokens = 500, seed = { command = "echo seeded-by-command" } }
[stages.work]
[stages.work.transitions]
"""


def test_seed_commands_follow_the_security_setting(engine, config) -> None:
    run, model = engine.run(SEEDED, [say("done")])
    assert "seeded-by-command" in "\n".join(model.requests[0].system)
    config("[security]\nallow_seed_commands = false\n")
    run, model = engine.run(SEEDED, [say("done")])
    system = "\n".join(model.requests[0].system)
    assert "seeded-by-command" not in system.replace("echo seeded-by-command", "")
    assert "allow_seed_commands = false" in system


def reader(outside: Path) -> str:
    return f"""
[read_paths]
allow = ["{outside}"]
[stages.work]
available_tools = ["read_file"]
[stages.work.transitions]
"""


def test_declared_read_paths_need_a_grant(engine, config, tmp_path: Path) -> None:
    outside = tmp_path / "shared"
    outside.mkdir()
    (outside / "notes.txt").write_text("shared notes")
    turns = [call("read_file", path=str(outside / "notes.txt")), say("done")]
    _, model = engine.run(reader(outside), turns)
    assert results(model)[0].startswith("[error]") and "outside the working directory" in results(model)[0]
    config(f'[agent_read_paths.engine-test]\nallow = ["{outside}"]\n')
    _, model = engine.run(reader(outside), turns)
    assert "shared notes" in results(model)[0]
    # A grant never lets a run read what its blueprint did not declare.
    (tmp_path / "other.txt").write_text("private")
    config(f'[agent_read_paths.engine-test]\nallow = ["{tmp_path}"]\n')
    _, model = engine.run(reader(outside), [call("read_file", path=str(tmp_path / "other.txt")), say("done")])
    assert "private" not in results(model)[0]


def test_nudge_defaults_come_from_the_configuration(engine, config) -> None:
    config('[nudge]\nmax = 1\ntext = "Machine nudge for {stage}."\n')
    run, model = engine.run(WORK_STAGE, [say("a"), say("b"), say("c")])
    nudges = events_of(run, "nudge")
    assert [n.text for n in nudges] == ["Machine nudge for work."]


def test_the_model_pick_follows_the_stage_list_and_the_configuration() -> None:
    from lev_nb.engine.pipeline.inference import pick_model
    from lev_nb.engine.plan.types import ModelChoice, StagePlan
    from lev_nb.settings import load

    defaults = load(Path("/nonexistent/config.toml"), environ={})
    listed = StagePlan(name="s", index=0, models=(ModelChoice("google", "gemini-x"), ModelChoice("anthropic", "claude-a")))
    pick = pick_model(listed, defaults)
    assert (pick.provider, pick.model) == ("anthropic", "claude-a") and "model list" in (pick.note or "")
    unnamed = pick_model(StagePlan(name="s", index=0), defaults)
    assert (unnamed.provider, unnamed.model, unnamed.note) == ("anthropic", "claude-sonnet-4-6", None)
    unreachable = StagePlan(name="s", index=0, models=(ModelChoice("google", "gemini-x"),))
    fallback = pick_model(unreachable, defaults)
    assert fallback.provider == "anthropic" and "cannot reach" in (fallback.note or "")
    strict = StagePlan(name="s", index=0, models=(ModelChoice("google", "gemini-x"),), allow_user_default=False)
    assert "allow_user_default = false" in (pick_model(strict, defaults).refusal or "")
    mock_first = load(Path("/nonexistent/config.toml"), environ={"LEV_DEFAULT_PROVIDER": "mock"})
    both = StagePlan(name="s", index=0, models=(ModelChoice("anthropic", "claude-a"), ModelChoice("mock", "m")))
    assert pick_model(both, mock_first).provider == "mock"  # default_provider's entries go first


def test_the_model_pick_prefers_a_provider_whose_key_is_there(monkeypatch) -> None:
    from lev_nb.engine.pipeline.inference import model_candidates, pick_model
    from lev_nb.engine.plan.types import ModelChoice, StagePlan
    from lev_nb.settings import load

    defaults = load(Path("/nonexistent/config.toml"), environ={})
    stage = StagePlan(name="s", index=0, models=(ModelChoice("anthropic", "claude-a"), ModelChoice("openai", "gpt-x")))
    # No key at all: the author's first entry, so that the launch check names the key it needs.
    assert (pick_model(stage, defaults).provider, pick_model(stage, defaults).model) == ("anthropic", "claude-a")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    pick = pick_model(stage, defaults)
    assert (pick.provider, pick.model) == ("openai", "gpt-x") and "model list" in (pick.note or "")
    # The entry without a key stays on the list, last: a failover target once its key is set.
    picks, _ = model_candidates(stage, defaults)
    assert [(p.provider, p.model) for p in picks][-1] == ("anthropic", "claude-a")
    # Ollama needs no key; a key written in [providers] counts like the variable.
    local = StagePlan(name="s", index=0, models=(ModelChoice("ollama", "qwen3:8b"),))
    assert pick_model(local, defaults).provider == "ollama"
    monkeypatch.delenv("OPENAI_API_KEY")
    keyed = load(Path("/nonexistent/config.toml"), environ={}, session={"providers": {"openai_api_key": "sk-x"}})
    assert pick_model(stage, keyed).provider == "openai"


def test_a_kept_model_pick_follows_keys_and_providers_registered_later(monkeypatch) -> None:
    """Every run asks for its stages' candidates; the answer is kept with the settings, but a key
    set, a key removed or a provider registered afterwards changes it on the next ask."""
    from lev_nb.engine import model_choice
    from lev_nb.engine.pipeline.inference import model_candidates
    from lev_nb.engine.plan.types import ModelChoice, StagePlan
    from lev_nb.providers import resolve
    from lev_nb.settings import load

    defaults = load(Path("/nonexistent/config.toml"), environ={})
    stage = StagePlan(name="s", index=0, models=(ModelChoice("mine", "m1"), ModelChoice("openai", "gpt-x")))
    worked = []
    real = model_choice._candidates
    monkeypatch.setattr(model_choice, "_candidates", lambda *a: worked.append(1) or real(*a))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    first = [(p.provider, p.model) for p in model_candidates(stage, defaults)[0]]
    assert ("mine", "m1") not in first and model_candidates(stage, defaults)[0][0].provider == first[0][0]
    assert len(worked) == 1  # the second ask was answered from the kept one
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert model_candidates(stage, defaults)[0][0].provider == "openai"
    monkeypatch.setattr(resolve, "_FACTORIES", dict(resolve._FACTORIES))  # undone after the test
    resolve.register_provider("mine", lambda model, options: None)
    assert (model_candidates(stage, defaults)[0][0].provider, len(worked)) == ("mine", 3)
    picks, _ = model_candidates(stage, defaults)
    picks.clear()  # a caller's copy: the kept answer is not changed through it
    assert model_candidates(stage, defaults)[0]
    assert "sk-test" not in repr(defaults.memo())  # what is kept holds no key's value


class CountingModel:
    """A provider that answers after a short pause and records how many calls overlapped."""

    name = "counting"

    def __init__(self) -> None:
        self.in_flight = 0
        self.most = 0

    async def complete(self, request):
        import asyncio

        from lev_nb.messages import ModelResponse

        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await asyncio.sleep(0.05)
        finally:
            self.in_flight -= 1
        return ModelResponse(text="done")


@pytest.mark.parametrize("width", [2, 5])
def test_the_inference_pool_bounds_calls_in_flight_across_runs(engine, config, width: int) -> None:
    config(f"[limits]\nmax_concurrent_inferences = {width}\n")
    model = CountingModel()
    runs = [engine.start("[stages.work]\n[stages.work.transitions]\n", model)[0] for _ in range(8)]
    for run in runs:
        run.wait(60)
    assert all(run.status == "complete" for run in runs)
    assert model.most == width  # never more, and the pool is actually used up to its width


@pytest.mark.parametrize("width", [1, 3])
def test_the_tool_pool_bounds_tool_calls_in_flight_across_runs(engine, config, monkeypatch, width: int) -> None:
    import asyncio
    import dataclasses
    import threading

    from lev_nb.engine.pipeline import tools as stage_tools
    from lev_nb.tools.builtin import default_registry
    from support import calls

    config(f"[limits]\nmax_concurrent_tools = {width}\n")
    lock = threading.Lock()
    counts = {"now": 0, "most": 0}
    # Calls pass the barrier in groups of exactly `width`: a pool narrower than its width would
    # leave the barrier waiting (BrokenBarrierError -> an [error] result), a wider one shows in "most".
    barrier = threading.Barrier(width, timeout=30)

    def blocking() -> str:
        with lock:
            counts["now"] += 1
            counts["most"] = max(counts["most"], counts["now"])
        try:
            barrier.wait()
        finally:
            with lock:
                counts["now"] -= 1
        return "12:00"

    async def handler(ctx, args):
        return await asyncio.to_thread(blocking)

    def registry():
        reg = default_registry()
        reg.register(dataclasses.replace(reg.get("current_time"), handler=handler))
        return reg

    monkeypatch.setattr(stage_tools, "default_registry", registry)
    toml = '[stages.work]\navailable_tools = ["current_time"]\n[stages.work.transitions]\n'
    batch = calls(*[("current_time", {})] * 4)
    runs = [engine.start(toml, [batch, say("done")])[0] for _ in range(3 * width)]
    for run in runs:
        run.wait(60)
    assert all(run.status == "complete" for run in runs), [r.error for r in runs]
    results = [e for r in runs for e in events_of(r, "tool_finished")]
    assert len(results) == 12 * width and all(e.ok for e in results), [e.summary for e in results if not e.ok]
    assert counts["most"] == width
