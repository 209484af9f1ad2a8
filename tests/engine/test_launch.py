"""The run-start checks (lev_nb.engine.launch.check_launch): each problem a launch request can have is
refused before the run exists, with one message, a Python hint in ``str(exc)`` and a command-line
hint in ``exc.for_cli()``; nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import blueprint

import lev_nb
from lev_nb.engine.launch import LaunchError, check_launch
from lev_nb.engine.plan.build import plan_from_blueprint
from lev_nb.providers import ScriptedModel

KEYED = """
[stages.read]
model = { models = [{ provider = "anthropic", model = "claude-haiku-4-5" }] }
[stages.read.transitions.fallback]
condition = "error"
[stages.read.transitions.done]
hint = "done"
[stages.fallback]
model = { models = [{ provider = "openai", model = "gpt-x" }, { provider = "anthropic", model = "claude-haiku-4-5" }] }
[stages.fallback.transitions]
[stages.done]
mode = "output"
[stages.done.transitions]
"""

INPUTS = """
[context.regions]
system = { kind = "pinned", max_tokens = 1000 }
diff = { kind = "pinned", max_tokens = 1000, seed = "input", required = true }
criteria = { kind = "pinned", max_tokens = 1000, seed = "input" }
[stages.only]
[stages.only.transitions]
"""


def refused(home: Path, toml: str, *args: object, **kwargs: object) -> LaunchError:
    """Start a run of ``toml`` that must be refused; returns the error, after checking nothing was written."""
    bp = blueprint(toml)
    with pytest.raises(LaunchError) as info:
        bp.run(*args, home=home, **kwargs)
    assert not (home / "runs").exists()
    return info.value


def test_a_missing_key_is_one_message_naming_every_stage_that_needs_it(home: Path) -> None:
    error = refused(home, KEYED, "t")
    assert str(error) == (
        "no API key for anthropic: ANTHROPIC_API_KEY is not set, and stages 'read', 'fallback', 'done' of "
        "blueprint 'engine-test' run on anthropic models; set os.environ['ANTHROPIC_API_KEY'], or try the "
        "agent offline with model='mock'"
    )
    assert error.for_cli().endswith("; export ANTHROPIC_API_KEY=<your key>, or try the agent offline with --model mock")


def test_the_key_variable_comes_from_the_configuration(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home.mkdir(parents=True)
    (home / "config.toml").write_text('[model_providers.anthropic]\napi_key_env = "TEAM_KEY"\n', encoding="utf-8")
    assert "TEAM_KEY is not set" in str(refused(home, KEYED, "t"))
    monkeypatch.setenv("TEAM_KEY", "sk-team")
    plan = plan_from_blueprint(blueprint(KEYED))
    launch = check_launch(plan, task="t", settings=lev_nb.config())  # no refusal: the key is there
    assert launch.provider is None and launch.workdir is None


def test_a_provider_override_needs_its_key_and_a_known_provider(home: Path) -> None:
    error = refused(home, KEYED, "t", model="anthropic/claude-haiku-4-5")
    assert "ANTHROPIC_API_KEY is not set, and stages 'read', 'fallback', 'done'" in str(error)
    error = refused(home, KEYED, "t", model="antropic/claude")
    assert str(error) == (
        "model 'antropic/claude' names the provider 'antropic', which lev_nb cannot call (did you mean "
        "'anthropic'?); the providers it calls are anthropic, mock, ollama, openai, openrouter; pass model='PROVIDER/MODEL' with one of "
        "them, or model='mock' for a dry run"
    )


def test_a_provider_script_setting_that_names_no_file_says_where_it_looked(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not "names the provider 'spin', which lev_nb cannot call": the provider is configured, its
    script is what is missing, and a relative path is read in the providers folder."""
    from lev_nb.providers import rhai_provider

    monkeypatch.setattr(rhai_provider, "RECHECK_S", 0.0)  # the file made below is looked for again at once
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[model_providers.spin]\nscript = "nested/spin.rhai"\n', encoding="utf-8")
    error = refused(home, KEYED, "t", model="spin/any")
    assert str(error).startswith(
        f"model 'spin/any': [model_providers.spin] script = \"nested/spin.rhai\" names no file "
        f"(looked for {home / 'providers' / 'nested' / 'spin.rhai'}); a relative script path is read in "
        "$LEV_HOME/providers/")
    only_spin = ('[stages.read]\nmodel = { models = [{ provider = "spin", model = "x" }], allow_user_default = false }\n'
                 '[stages.read.transitions]\n')
    assert "spin.rhai\" names no file (looked for" in str(refused(home, only_spin, "t"))  # a stage's own list too
    (home / "providers" / "nested").mkdir(parents=True)
    (home / "providers" / "nested" / "spin.rhai").write_text(
        "fn initialize(config) { #{} }\nfn inference(state, request) { #{ content: \"hi\" } }\n", encoding="utf-8")
    assert blueprint(KEYED).run("t", model="spin/any", home=home).wait(30).status  # found now: the run starts


def test_a_model_spec_in_no_accepted_form_is_refused(home: Path) -> None:
    error = refused(home, KEYED, "t", model="nonsense")
    assert "model 'nonsense' is not a model spec" in str(error) and "'mock'" in str(error)
    assert "scripted" in str(refused(home, KEYED, "t", model=f"scripted:{home / 'missing.json'}"))


def test_a_stage_that_allows_only_unreachable_providers_is_refused(home: Path) -> None:
    toml = """
    [stages.only]
    model = { models = [{ provider = "google", model = "gemini-x" }], allow_user_default = false }
    [stages.only.transitions]
    """
    error = refused(home, toml, "t")
    assert str(error).startswith("stage 'only' allows only google/gemini-x, and lev_nb cannot reach that provider")
    assert "--model" in error.for_cli() and "--model" not in str(error)
    # A provider lev_nb calls but has no key for is named with the key it needs.
    error = refused(home, toml.replace('"google", model = "gemini-x"', '"openai", model = "gpt-x"'), "t")
    assert str(error).startswith("no API key for openai: OPENAI_API_KEY is not set, and stage 'only'")


def test_an_unknown_default_provider_names_where_it_was_set(home: Path) -> None:
    home.mkdir(parents=True)
    (home / "config.toml").write_text('default_provider = "antropic"\n', encoding="utf-8")
    error = refused(home, "[stages.only]\n[stages.only.transitions]\n", "t")
    assert "stage 'only' of blueprint 'engine-test' would run on the default provider 'antropic'" in str(error)
    assert f"from {home / 'config.toml'}:1" in str(error)


def test_launch_models_need_no_key(home: Path, workdir: Path) -> None:
    for model in ("mock", ScriptedModel([{"text": "done"}])):
        run = blueprint(KEYED).run("t", model=model, home=home, workdir=workdir).wait(30)
        assert run.run_id and "API key" not in (run.error or "")


def test_a_task_for_a_blueprint_whose_inputs_leave_it_out_is_refused(home: Path) -> None:
    error = refused(home, INPUTS, "review this", model="mock", diff="+1")
    assert str(error) == (
        "blueprint 'engine-test' takes no task: no region of it is filled from the task, and its inputs are "
        "'diff', 'criteria'; leave out the task and pass diff=..., criteria=..."
    )
    assert error.for_cli().endswith("; leave out --task and pass --diff TEXT, --criteria TEXT")


def test_without_declared_inputs_the_task_goes_to_the_conversation(home: Path, workdir: Path) -> None:
    toml = """
    [context.regions]
    conversation = { kind = "sliding_window", max_items = 10, max_tokens = 4000 }
    [stages.only]
    nudge = { enabled = false }
    [stages.only.transitions]
    """
    model = ScriptedModel([{"text": "done"}])
    run = blueprint(toml).run("count the files", model=model, home=home, workdir=workdir).wait(30)
    assert run.status == "complete"
    assert model.requests[0].messages[0].text() == "count the files"


def test_required_inputs_and_unknown_names(home: Path) -> None:
    error = refused(home, INPUTS, model="mock", criteria="strict")
    assert str(error) == ("blueprint 'engine-test' needs the input 'diff': it fills the required region 'diff'; "
                          "pass diff=...")
    error = refused(home, INPUTS, model="mock", diff="+1", critera="strict")
    assert str(error).startswith("blueprint 'engine-test' has no input 'critera' (did you mean 'criteria'?)")
    error = refused(home, INPUTS, model="mock", diff="+1", yollo=True)  # a misspelt option of the run itself
    assert "has no input 'yollo' (did you mean 'yolo'?)" in str(error)
    task_required = '[context.regions]\ntask = { kind = "pinned", max_tokens = 100, required = true }\n' \
                    '[stages.only]\n[stages.only.transitions]\n'
    error = refused(home, task_required, "  ", model="mock")
    assert str(error) == ("blueprint 'engine-test' needs the task: it fills the required region 'task'; "
                          "pass the task as the first argument")
    assert error.for_cli().endswith("; pass --task TEXT (or @FILE to read it from a file)")


def test_output_formats_a_keystroke_from_a_known_one_are_refused(home: Path, workdir: Path) -> None:
    error = refused(home, KEYED, "t", model="mock", output_format="cvs")
    assert str(error).startswith("output format 'cvs' looks like a misspelling of 'csv'")
    assert str(error).endswith("; pass output_format='csv'")
    typo = KEYED.replace('mode = "output"', 'mode = "output"\noutput = { format = "xlm" }')
    error = refused(home, typo, "t", model="mock")
    assert str(error).startswith("blueprint 'engine-test': stages.done.output.format = 'xlm' looks like a "
                                 "misspelling of 'xml'")
    # A label of one's own is the author's business: the model is asked for it, unchecked.
    run = blueprint(KEYED).run("t", model="mock", output_format="a2ui", home=home, workdir=workdir).wait(30)
    assert run.status == "complete", run.error
    assert run.result.format == "a2ui"


def test_webhook_and_workdir(home: Path, tmp_path: Path) -> None:
    error = refused(home, KEYED, "t", model="mock", webhook="example/hook")
    assert str(error) == "the webhook 'example/hook' is not an http:// or https:// URL; pass webhook='http://HOST/PATH'"
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    error = refused(home, KEYED, "t", model="mock", workdir=blocker / "inside")
    assert str(error) == (f"the working directory '{blocker / 'inside'}' does not exist and cannot be created in "
                          f"'{blocker}'; create it, or pass another workdir=")


def test_python_hints_never_name_flags_and_cli_hints_never_name_keywords(home: Path) -> None:
    errors = [
        refused(home, KEYED, "t"),
        refused(home, INPUTS, "t", model="mock", diff="x"),
        refused(home, INPUTS, model="mock"),
        refused(home, KEYED, "t", model="mock", output_format="jsno"),
        refused(home, KEYED, "t", model="mock", webhook="nope"),
    ]
    for error in errors:
        assert "--" not in str(error), str(error)
        assert "=..." not in error.for_cli() and "model='" not in error.for_cli(), error.for_cli()
