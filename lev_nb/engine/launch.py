"""The run-start checks: everything about a launch request that can be judged before the run exists
(docs/runs.md#starting-a-run; issue 11).

:func:`check_launch` is called by :func:`lev_nb.engine.api.start_run` (so by ``bp.run``,
``lev_nb.run``, ``lev run`` and ``%%lev`` alike) before any run record is written. It judges, in
this order, and refuses the first problem with one :class:`LaunchError`:

1. the model spec (a string in none of the accepted forms, a missing scripted file, a provider
   lev_nb cannot call);
2. the caller inputs (a name the blueprint does not declare, with a "did you mean");
3. where the task goes: a blueprint that declares inputs, none of them ``task``, refuses a task,
   naming the inputs it does take; a blueprint that declares no inputs at all takes the task into
   its first pinned region, else the conversation, as before;
4. required inputs that were not given;
5. output formats that look like a misspelling of a format lev_nb knows (the launch request's and
   the blueprint's own; any other label is the author's own and allowed, see
   :mod:`lev_nb.blueprint.formats`);
6. the model each stage would use (its pick under the user's configuration,
   :func:`~lev_nb.engine.pipeline.inference.pick_model`) and the API key its provider needs: one
   message naming every stage that needs a missing key; then what that model can do: a stage that
   offers tools on a model that cannot call them (``[model_capabilities.<model>] supports_tools =
   false``) is refused, naming the stage;
7. the webhook URL;
8. isolation: a ``[sandbox]`` that must be had (``on_unavailable = "error"``) but that this machine
   cannot provide (:func:`lev_nb.sandbox.choose`), and, when taint tracking is on, a
   ``$LEV_HOME/policy.toml`` that cannot be read (a wrong label names the file and key);
9. the working directory (a folder that does not exist is created by the run; one that cannot be
   created is refused here).

A LaunchError carries separate hints for a terminal (``--flags``) and for Python (keyword
arguments), so neither ever gets the other's advice: ``str(exc)`` is the Python form and
:meth:`LaunchError.for_cli` the command-line one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lev_nb.blueprint.errors import did_you_mean
from lev_nb.blueprint.formats import format_typo
from lev_nb.errors import UsageError
from lev_nb.records import record

if TYPE_CHECKING:
    from lev_nb.engine.plan.types import RunPlan, SeedPlan
    from lev_nb.providers.base import Provider
    from lev_nb.settings import Settings

__all__ = ["Launch", "LaunchError", "check_launch"]


class LaunchError(UsageError):
    """A run that cannot start as asked; nothing was written.

    ``message`` says what is wrong; ``cli_hint`` and ``python_hint`` what to do, in the words of a
    terminal and of Python. ``str(exc)`` is the message with the Python hint (what a notebook
    shows, as one clean block); :meth:`for_cli` is the message with the command-line hint.
    """

    def __init__(self, message: str, *, cli_hint: str | None = None, python_hint: str | None = None) -> None:
        super().__init__(message, python_hint)
        self.cli_hint = cli_hint
        self.python_hint = python_hint

    def _join(self, hint: str | None) -> str:
        return f"{self.message}; {hint}" if hint else self.message

    def for_cli(self) -> str:
        """The message with the hint for a terminal user."""
        return self._join(self.cli_hint)


@record
class Launch:
    """What the checks resolved: the provider given at launch (None: each stage's own model) and
    the working directory as an absolute path (None: a fresh folder in the run record)."""

    provider: Provider | None
    workdir: Path | None


def check_launch(
    plan: RunPlan,
    *,
    task: str = "",
    inputs: dict[str, Any] | None = None,
    model: Any = None,
    output_format: str | None = None,
    workdir: str | os.PathLike[str] | None = None,
    webhook: str | None = None,
    settings: Settings,
    options: Iterable[str] = (),
    home: str | os.PathLike[str] | None = None,
) -> Launch:
    """Judge a launch request against ``plan`` and the user's ``settings``; raise LaunchError for
    the first problem (see the module docstring for the order), else return what was resolved.
    ``options`` are the caller's own keyword names, suggested for an input name close to one."""
    provider = _check_model(model)
    given = dict(inputs or {})
    check_input_names(plan, given, options)
    _check_task(plan, task)
    _check_required(plan, task, given)
    _check_formats(plan, output_format)
    _check_keys(plan, provider, settings)
    _check_capabilities(plan, provider, settings)
    _check_webhook(webhook)
    _check_isolation(plan, settings)
    _check_taint_policy(plan, settings)
    checked_workdir = _check_workdir(workdir)
    _check_alarming_workdir(checked_workdir, settings)
    _check_mounts(plan, settings, checked_workdir, home)
    return Launch(provider, checked_workdir)


# ------------------------------------------------------------------------------------------------
# 1. The model spec
# ------------------------------------------------------------------------------------------------
def _check_model(model: Any) -> Provider | None:
    from lev_nb.providers.resolve import ModelOverride, is_registered, known_providers, resolve_model

    try:
        provider = resolve_model(model)
    except UsageError as exc:  # a spec in no accepted form: keep what it says to do as the hint
        raise LaunchError(exc.message, cli_hint=exc.hint, python_hint=exc.hint) from None
    except ValueError as exc:  # a scripted file that cannot be read
        raise LaunchError(str(exc)) from None
    if isinstance(provider, ModelOverride) and not is_registered(provider.provider):
        _check_script_setting(provider.provider, provider.name)
        known = known_providers()
        hint = did_you_mean(provider.provider, known)
        raise LaunchError(
            f"model '{provider.name}' names the provider '{provider.provider}', which lev_nb cannot call"
            f"{f' ({hint})' if hint else ''}; the providers it calls are {', '.join(known)}",
            cli_hint="pass --model PROVIDER/MODEL with one of them, or --model mock for a dry run",
            python_hint="pass model='PROVIDER/MODEL' with one of them, or model='mock' for a dry run",
        )
    return provider


SCRIPT_PATH_HINT = ("a relative script path is read in $LEV_HOME/providers/: give the file's full path, or put "
                    "it there")


def _check_script_setting(name: str, spec: str) -> None:
    """A provider whose ``[model_providers.<name>] script`` names no file: say where it was looked
    for, rather than that lev_nb does not know the provider."""
    from lev_nb.providers.resolve import missing_script
    from lev_nb.settings import current as current_settings

    why = missing_script(name, current_settings())
    if why is not None:
        raise LaunchError(f"model '{spec}': {why}", cli_hint=SCRIPT_PATH_HINT, python_hint=SCRIPT_PATH_HINT)


# ------------------------------------------------------------------------------------------------
# 2-4. Inputs and the task
# ------------------------------------------------------------------------------------------------
def _declared(plan: RunPlan) -> list[SeedPlan]:
    return list(plan.caller_inputs)


def _key(seed: SeedPlan) -> str:
    return seed.key or seed.region


def _as_options(keys: list[str]) -> str:
    return ", ".join(f"--{k} TEXT" for k in keys)


def _as_kwargs(keys: list[str]) -> str:
    return ", ".join(f"{k}=..." for k in keys)


def check_input_names(plan: RunPlan, given: Iterable[str], options: Iterable[str] = ()) -> None:
    """Raise LaunchError for the first name in ``given`` that is not one of the blueprint's
    inputs: keyword arguments a launch does not know itself are taken as inputs, so a misspelt
    option (``yollo=``) lands here, and ``options`` (the launch's own keyword names) are offered
    when one is close."""
    keys = [_key(s) for s in _declared(plan) if _key(s) != "task"]
    for name in given:
        if name in keys:
            continue
        hint = did_you_mean(name, keys) or did_you_mean(name, options)
        if keys:
            takes = f"its inputs are {', '.join(repr(k) for k in keys)}"
        else:
            takes = "it declares no inputs besides the task"
        raise LaunchError(
            f"blueprint '{plan.agent_name}' has no input '{name}'{f' ({hint})' if hint else ''}: {takes}",
            cli_hint=f"pass {_as_options(keys)}" if keys else "leave the option out",
            python_hint=f"pass {_as_kwargs(keys)}" if keys else "leave the argument out",
        )


def _check_task(plan: RunPlan, task: str) -> None:
    declared = _declared(plan)
    if not task or not declared or any(_key(s) == "task" for s in declared):
        return
    keys = [_key(s) for s in declared]
    raise LaunchError(
        f"blueprint '{plan.agent_name}' takes no task: no region of it is filled from the task, and "
        f"its inputs are {', '.join(repr(k) for k in keys)}",
        cli_hint=f"leave out --task and pass {_as_options(keys)}",
        python_hint=f"leave out the task and pass {_as_kwargs(keys)}",
    )


def _check_required(plan: RunPlan, task: str, given: dict[str, Any]) -> None:
    for seed in _declared(plan):
        if not seed.required:
            continue
        key = _key(seed)
        value = task if key == "task" else given.get(key)
        if value is not None and str(value).strip():
            continue
        what = "the task" if key == "task" else f"the input '{key}'"
        raise LaunchError(
            f"blueprint '{plan.agent_name}' needs {what}: it fills the required region '{seed.region}'",
            cli_hint=f"pass --{key} TEXT (or @FILE to read it from a file)",
            python_hint="pass the task as the first argument" if key == "task" else f"pass {key}=...",
        )


# ------------------------------------------------------------------------------------------------
# 5. Output formats
# ------------------------------------------------------------------------------------------------
def _check_formats(plan: RunPlan, requested: str | None) -> None:
    meant = format_typo(requested)
    if meant is not None:
        raise LaunchError(
            f"output format '{requested}' looks like a misspelling of '{meant}' (lev_nb checks answers "
            "in json, xml, yaml, csv and toml; any other label is passed to the model as written)",
            cli_hint=f"pass --output-format {meant}",
            python_hint=f"pass output_format='{meant}'",
        )
    declared = [("agent.output.format", plan.agent_output)]
    declared += [(f"stages.{s.name}.output.format", s.output) for s in plan.stages]
    for where, spec in declared:
        label = spec.format if spec is not None else None
        meant = format_typo(label)
        if meant is not None:
            raise LaunchError(
                f"blueprint '{plan.agent_name}': {where} = '{label}' looks like a misspelling of '{meant}'",
                cli_hint="fix it in the blueprint (`lev validate` lists every such problem)",
                python_hint="fix it in the blueprint (lev_nb.validate(bp) lists every such problem)",
            )


# ------------------------------------------------------------------------------------------------
# 6. Models, providers and keys
# ------------------------------------------------------------------------------------------------
def _check_keys(plan: RunPlan, provider: Provider | None, settings: Settings) -> None:
    from lev_nb.engine.pipeline.inference import pick_model
    from lev_nb.providers.resolve import ModelOverride, is_registered, known_providers, missing_key

    if provider is not None and not isinstance(provider, ModelOverride):
        return  # mock, scripted or a Provider object: it answers every stage, no key involved
    users: dict[str, list[str]] = {}  # provider -> the stages that would call it
    if isinstance(provider, ModelOverride):
        users[provider.provider] = [s.name for s in plan.stages]
    else:
        for stage in plan.stages:
            pick = pick_model(stage, settings)
            if pick.refusal is not None:
                raise LaunchError(
                    pick.refusal,
                    cli_hint="configure that provider, or run with --model PROVIDER/MODEL or --model mock",
                    python_hint="configure that provider, or pass model='PROVIDER/MODEL' or model='mock'",
                )
            users.setdefault(pick.provider, []).append(stage.name)
    for name, stages in users.items():
        if not is_registered(name, settings):
            source = settings.source("default_provider")
            raise LaunchError(
                f"{_stages(stages)} of blueprint '{plan.agent_name}' would run on the default provider "
                f"'{name}' (default_provider, from {source}), which lev_nb cannot call; the providers "
                f"it calls are {', '.join(known_providers(settings))}",
                cli_hint="change default_provider (see `lev config`), or run with --model mock",
                python_hint="change default_provider (lev_nb.configure), or pass model='mock'",
            )
    missing = [(name, var, stages) for name, stages in users.items() if (var := missing_key(name, settings))]
    if not missing:
        return
    parts = [f"{var} is not set, and {_stages(stages)} of blueprint '{plan.agent_name}' "
             f"run{'s' if len(stages) == 1 else ''} on {name} models"
             for name, var, stages in missing]
    exports = " ".join(f"{var}=<your key>" for _, var, _ in missing)
    raise LaunchError(
        f"no API key for {' and '.join(name for name, _, _ in missing)}: " + "; ".join(parts),
        cli_hint=f"export {exports}, or try the agent offline with --model mock",
        python_hint=f"set os.environ[{missing[0][1]!r}], or try the agent offline with model='mock'",
    )


def _check_capabilities(plan: RunPlan, provider: Provider | None, settings: Settings) -> None:
    from lev_nb.engine.pipeline.inference import pick_model
    from lev_nb.providers.catalogue import capabilities
    from lev_nb.providers.resolve import ModelOverride

    if provider is not None and not isinstance(provider, ModelOverride):
        return  # mock, scripted or a Provider object: lev_nb knows nothing about its model
    refused: list[str] = []
    model = ""
    for stage in plan.stages:
        if not stage.tools:
            continue
        if isinstance(provider, ModelOverride):
            pick_provider, pick_model_name = provider.provider, provider.model
        else:
            pick = pick_model(stage, settings)
            pick_provider, pick_model_name = pick.provider, pick.model
        if not capabilities(pick_provider, pick_model_name, settings).supports_tools:
            refused.append(stage.name)
            model = model or f"{pick_provider}/{pick_model_name}"
    if refused:
        raise LaunchError(
            f"{_stages(refused)} of blueprint '{plan.agent_name}' offer{'s' if len(refused) == 1 else ''} tools, "
            f"and {model} cannot call tools ([model_capabilities] supports_tools = false)",
            cli_hint="run those stages on a model that calls tools (--model PROVIDER/MODEL), or correct "
                     "[model_capabilities] if the model does support them",
            python_hint="run those stages on a model that calls tools (model='PROVIDER/MODEL'), or correct "
                        "[model_capabilities] if the model does support them",
        )


def _stages(names: list[str]) -> str:
    if len(names) == 1:
        return f"stage '{names[0]}'"
    return "stages " + ", ".join(f"'{n}'" for n in names)


# ------------------------------------------------------------------------------------------------
# 7. The webhook and the working directory
# ------------------------------------------------------------------------------------------------
def _check_webhook(webhook: str | None) -> None:
    if webhook is not None and not webhook.startswith(("http://", "https://")):
        raise LaunchError(
            f"the webhook '{webhook}' is not an http:// or https:// URL",
            cli_hint="pass --webhook http://HOST/PATH",
            python_hint="pass webhook='http://HOST/PATH'",
        )


def _sandboxes(plan: RunPlan, settings: Settings) -> list[tuple[str, Any]]:
    """Who runs commands in which sandbox: the agent and each stage, under the machine-wide one."""
    from lev_nb.sandbox import SandboxSpec, under

    floor = SandboxSpec.of(settings.sandbox)
    return [("the agent", under(plan.sandbox, floor))] + [
        (f"stage '{s.name}'", under(s.sandbox, floor)) for s in plan.stages]


def _check_taint_policy(plan: RunPlan, settings: Settings) -> None:
    """A run behind the taint gate needs a policy file it can read (none at all is fine)."""
    if not plan.tracks_taint_anywhere(settings.taint_tracking):
        return
    from lev_nb.taint import PolicyError, load_policy

    try:
        load_policy()
    except PolicyError as exc:
        raise LaunchError(f"taint tracking is on and the policy file cannot be used: {exc}",
                          cli_hint="fix the file (`lev policy list` reads it) or move it aside",
                          python_hint="fix the file or move it aside") from exc


def _check_isolation(plan: RunPlan, settings: Settings) -> None:
    from lev_nb.sandbox import choose

    refused = [(who, choice) for who, spec in _sandboxes(plan, settings) if (choice := choose(spec)).refused]
    if refused:
        who, choice = refused[0]
        others = [] if who == "the agent" else [w for w, _ in refused[1:]]  # every stage inherits it
        also = f" (also {', '.join(others)})" if others else ""
        raise LaunchError(
            f"blueprint '{plan.agent_name}': {who}{also} must run its commands in a sandbox "
            f"(kind = \"{choice.spec.kind}\", on_unavailable = \"error\") and this machine has none: {choice.reason}",
            cli_hint="install bubblewrap (bwrap), or set on_unavailable = \"warn\" in [sandbox] to allow less isolation",
            python_hint="install bubblewrap (bwrap), or set on_unavailable = \"warn\" in [sandbox] to allow less isolation",
        )


def _check_mounts(plan: RunPlan, settings: Settings, workdir: Path | None,
                  home: str | os.PathLike[str] | None) -> None:
    """Every ``[sandbox] mount`` of the run against the one mount rule (:func:`lev_nb.sandbox.mount_problems`):
    nothing lev_nb hides may show, and a path outside the workdir needs the user's grant."""
    from lev_nb.blueprint.read_paths import ReadPathError
    from lev_nb.sandbox import mount_problems
    from lev_nb.settings.grants import mount_grant
    from lev_nb.settings.paths import config_path, lev_home

    specs = [spec for spec in dict.fromkeys(s for _, s in _sandboxes(plan, settings)) if spec.isolated and spec.mount]
    if not specs:
        return
    where = lev_home(home)
    # A run without a workdir gets one inside its run folder, which does not exist yet.
    work = workdir if workdir is not None else where / "runs" / "new-run" / "workdir"
    try:
        granted = mount_grant(plan.agent_name, settings)
    except ReadPathError as exc:
        raise LaunchError(f"[security] sandbox_mounts in your configuration: {exc}",
                          cli_hint="fix the entry in config.toml (`lev config` shows where it is)",
                          python_hint="fix the entry in config.toml") from None
    problems = [p for spec in specs for p in mount_problems(spec, work, (where, config_path()), granted)]
    if problems:
        raise LaunchError(
            f"blueprint '{plan.agent_name}': [sandbox] " + "; ".join(dict.fromkeys(problems)),
            cli_hint="grant a path in config.toml with [security] sandbox_mounts = [\"PATH\"] (\"PATH:rw\" to "
                     "write), or remove the mount; $LEV_HOME and the configuration can never be mounted",
            python_hint="grant a path in config.toml with [security] sandbox_mounts = [\"PATH\"] (\"PATH:rw\" "
                        "to write), or remove the mount; $LEV_HOME and the configuration can never be mounted",
        )


def _check_alarming_workdir(workdir: Path | None, settings: Settings) -> None:
    """Your home folder or a filesystem root as the working directory gives an agent's file tools and
    commands everything in it: refused unless ``[security] allowed_workdirs`` lists it (or a folder
    above it), as the upstream asks before such a run."""
    if workdir is None or not _may_be_home_or_root(workdir):
        return
    real = workdir.resolve()
    home = Path.home().resolve()
    if real != home and real.parent != real:
        return
    for entry in settings.security.allowed_workdirs:
        root = Path(entry).expanduser().resolve()
        if real == root or root in real.parents:
            return
    what = "your home folder" if real == home else "the root of the filesystem"
    fix = f'list it in config.toml: [security] allowed_workdirs = ["{workdir}"]'
    raise LaunchError(
        f"the working directory '{workdir}' is {what}: the agent's file tools and commands would reach "
        "everything in it",
        cli_hint=f"pass a project folder with --workdir, or {fix}",
        python_hint=f"pass a project folder as workdir=, or {fix}",
    )


def _may_be_home_or_root(workdir: Path) -> bool:
    """Whether ``workdir`` could be the home folder or the filesystem root. Three stats answer it
    for almost every run (one folder is one device and inode, whatever symlinks lead to it), where
    resolving both paths cost more than the rest of the launch checks; a folder that is not there
    yet, or cannot be looked at, gets the full check (``new/..`` is its parent)."""
    try:
        found = os.stat(workdir)
        return os.path.samestat(found, os.stat(Path.home())) or os.path.samestat(found, os.stat(os.sep))
    except (OSError, RuntimeError):  # RuntimeError: Path.home() with no home to name
        return True


def _check_workdir(workdir: str | os.PathLike[str] | None) -> Path | None:
    """The working directory as an absolute path. A folder that does not exist yet is fine (the run
    creates it, parents included) as long as its nearest existing parent is a writable folder."""
    if workdir is None:
        return None
    path = Path(workdir).expanduser().absolute()
    if path.exists():
        if not path.is_dir():
            raise LaunchError(
                f"the working directory '{path}' is a file, not a folder",
                cli_hint="pass --workdir with a folder", python_hint="pass workdir= with a folder",
            )
        return path
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise LaunchError(
            f"the working directory '{path}' does not exist and cannot be created in '{parent}'",
            cli_hint="create it, or pass another --workdir",
            python_hint="create it, or pass another workdir=",
        )
    return path


# ------------------------------------------------------------------------------------------------
# Launch permissions (--allow TOOL)
# ------------------------------------------------------------------------------------------------
def check_allowed_tools(plan: RunPlan, allow: Any, home: Any = None) -> tuple[str, ...]:
    """The tool names of ``--allow TOOL`` / ``allow=[...]``, checked: each must name a built-in tool
    (or its alias), one of the blueprint's script tools or a global one (``$LEV_HOME/tools``, or
    ``home``'s); raise LaunchError otherwise."""
    from lev_nb.blueprint.errors import did_you_mean
    from lev_nb.tools.builtin import default_registry

    if allow is None:
        return ()
    if isinstance(allow, str):
        allow = [allow]
    names = list(allow)
    registry = default_registry()
    known = set(registry.names()) | set(plan.script_tools) | {"bash"}
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise LaunchError("allow takes tool names, such as write_file or shell",
                              cli_hint="give --allow TOOL once per tool",
                              python_hint='pass allow=["write_file", "shell"]')
        if "__" in name.strip("_"):
            continue  # an MCP tool (server__tool): its server says whether it exists when it starts
        if name not in known and registry.canonical(name) not in known:
            from lev_nb.tools.scripts import global_tool_defs

            known |= {tool.name for tool in global_tool_defs(home, set())[0]}
        if name not in known and registry.canonical(name) not in known:
            hint = did_you_mean(name, sorted(known))
            raise LaunchError(
                f"--allow names a tool that does not exist: '{name}'" + (f" ({hint})" if hint else ""),
                cli_hint="name a built-in tool (write_file, edit_file, shell, ...) or one of the blueprint's script tools",
                python_hint="name a built-in tool (write_file, edit_file, shell, ...) or one of the blueprint's script tools",
            )
    return tuple(dict.fromkeys(names))
