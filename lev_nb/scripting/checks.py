"""``lev validate`` beyond the upstream: compile every Rhai script a blueprint names or discovers.

:func:`validate` is the verdict of ``lev validate`` on the blueprint itself: the blueprint
format's pipeline (:mod:`lev_nb.blueprint.pipeline`: hard checks and lints) with
:func:`script_findings` added after the lints. Unless an ``env`` is given, the lints run under the
user's configuration (:func:`lev_nb.settings.configured_lint_env`: read-path grants, safe-commands
opt-in; docs/blueprint.md#validation-and-lints), or its "unknown" form when the configuration cannot be read.

Tool scripts (``tools/*.rhai``), output validators, stage hooks and custom-region scripts are
compiled with the same hardened engine that runs them, so a syntax error, a missing entry point
or a wrong arity shows up when the blueprint is checked, not half-way through a paid run.
Each problem is an ``error`` finding with code ``script-error`` naming the file and line; a tool
file that loads but cannot be used (name clash, unknown capability) is a ``script-tool-skipped``
warning, since the run goes on without it.

:func:`isolation_findings` says where the blueprint's commands will run on this machine
(``sandbox-backend`` note, or ``sandbox-unavailable``: a warning, also when ``[sandbox]`` is required
and runs here would be refused, since the verdict on a blueprint does not depend on the machine).
"""

from __future__ import annotations

import os
from pathlib import Path

from lev_nb.blueprint import pipeline
from lev_nb.blueprint.constants import BUILTIN_TOOLS, SUBAGENT_TOOLS
from lev_nb.blueprint.lints import LintEnv
from lev_nb.blueprint.model import Blueprint
from lev_nb.blueprint.report import Finding, Report
from lev_nb.sandbox import SandboxSpec
from lev_nb.settings.grants import configured_lint_env
from lev_nb.workspace import PathEscape, confine

from ._common import ScriptError
from .hooks import compile_hooks
from .regions import compile_region_script
from .tools import discover_tools
from .validators import compile_validator

SCRIPT_ERROR = "script-error"
TOOL_SKIPPED = "script-tool-skipped"
SANDBOX_BACKEND = "sandbox-backend"
SANDBOX_UNAVAILABLE = "sandbox-unavailable"
SANDBOX_MOUNT_REFUSED = "sandbox-mount-refused"


def validate(source: str | os.PathLike[str] | Blueprint, *, deny_warnings: bool = False,
             env: pipeline.EnvSpec = None) -> Report:
    """Validate an agent folder, its agent.leviath, TOML text, an agent's name or a loaded :class:`Blueprint`:
    the hard checks, the lints and the script compile checks, as ``lev validate`` reports them.
    Refusals and unreadable manifests are handled as in :func:`~lev_nb.blueprint.pipeline.validate_source`.
    ``env`` (default: the user's configuration) is the lint environment, or a function of the
    blueprint that returns one. (``lev_nb.validate`` is :func:`lev_nb.verdict.validate`, which adds
    what depends on this install: the configured providers and each stage's model.)
    """
    from lev_nb.catalog import resolve_source

    lint_env = env if env is not None else configured_lint_env
    return pipeline.validate_source(resolve_source(source), deny_warnings=deny_warnings, env=lint_env,
                                    checks=CHECKS)


def validate_blueprint(bp: Blueprint, *, deny_warnings: bool = False, env: pipeline.EnvSpec = None) -> Report:
    """:func:`validate` for an already loaded blueprint."""
    lint_env = env if env is not None else configured_lint_env
    return pipeline.validate_blueprint(bp, deny_warnings=deny_warnings, env=lint_env, checks=CHECKS)


def isolation_findings(bp: Blueprint) -> list[Finding]:
    """Where the blueprint's commands will run on this machine (:mod:`lev_nb.sandbox`): for the
    agent's ``[sandbox]`` and each stage's own, a ``sandbox-backend`` note naming the backend, or a
    ``sandbox-unavailable`` warning saying what is missing (that runs are refused here when the
    sandbox is required, or run with less isolation when ``on_unavailable = "warn"``). A warning,
    not an error: the blueprint is valid, this machine lacks a program (the upstream's own test
    blueprints with ``kind = "container"`` are valid there)."""
    from lev_nb.sandbox import choose, describe, resolve, under
    from lev_nb.settings import ConfigError, current

    try:
        floor = SandboxSpec.of(current().sandbox)  # the machine-wide [sandbox] of config.toml
    except ConfigError:
        floor = SandboxSpec()
    tables: list[tuple[str | None, SandboxSpec]] = [(None, under(resolve(bp.sandbox), floor))]
    tables += [(name, under(resolve(bp.sandbox, st.sandbox), floor))
               for name, st in bp.stages.items() if st.sandbox is not None]
    findings = []
    seen: set[SandboxSpec] = set()
    for stage, spec in tables:
        if not spec.isolated or spec in seen:
            continue
        seen.add(spec)
        where = f"stage '{stage}'" if stage else "[sandbox]"
        choice = choose(spec)
        if not choice.reason:
            findings.append(Finding(SANDBOX_BACKEND, "note", f"{where}: commands run {describe(choice)}", stage, None))
        elif choice.refused:
            findings.append(Finding(
                SANDBOX_UNAVAILABLE, "warning",
                f"{where} requires a sandbox (kind = \"{spec.kind}\") and this machine has none: {choice.reason}; "
                "runs of this blueprint are refused here", stage,
                "install bubblewrap (bwrap) or a container runtime, or set on_unavailable = \"warn\"",
            ))
        else:
            findings.append(Finding(
                SANDBOX_UNAVAILABLE, "warning",
                f"{where} asks for a sandbox (kind = \"{spec.kind}\") this machine cannot give: {choice.reason}; "
                f"commands would run {describe(choice)}", stage,
                "install bubblewrap (bwrap) or a container runtime for the isolation asked for",
            ))
        findings += _mount_findings(bp.agent.name, spec, where, stage)
    return findings


def _mount_findings(agent: str, spec: SandboxSpec, where: str, stage: str | None) -> list[Finding]:
    """A ``sandbox-mount-refused`` warning for each mount a run would be refused for on this machine
    (the one rule, :func:`lev_nb.sandbox.mount_problems`, under the user's configuration; a
    configuration that cannot be read grants nothing). A warning, not an error: whether a path is
    granted is this machine's configuration, not the blueprint's fault."""
    from lev_nb.blueprint.read_paths import ReadPathError
    from lev_nb.sandbox import MountGrant, mount_problems
    from lev_nb.settings import ConfigError, current
    from lev_nb.settings.grants import mount_grant
    from lev_nb.settings.paths import config_path, lev_home

    if not spec.mount:
        return []
    granted: MountGrant | None
    try:
        granted = mount_grant(agent, current())
    except (ConfigError, ReadPathError):
        granted = None
    problems = mount_problems(spec, Path.cwd(), (lev_home(), config_path()), granted)
    fix = ('grant the path in config.toml: [security] sandbox_mounts = ["PATH"] ("PATH:rw" to write), '
           "or remove the mount; $LEV_HOME and the configuration can never be mounted")
    return [Finding(SANDBOX_MOUNT_REFUSED, "warning", f"{where}: {problem}; runs are refused here until "
                    "that changes", stage, fix) for problem in problems]


def script_findings(bp: Blueprint) -> list[Finding]:
    """Compile every script of ``bp``; one finding per problem, in blueprint order."""
    base = bp.base_dir
    if base is None:
        return []  # a blueprint from text has no folder to find scripts in
    findings: list[Finding] = []
    findings += _tool_findings(base)
    findings += _validator_findings(bp, base)
    findings += _hook_findings(bp, base)
    findings += _region_findings(bp, base)
    return findings


def _locate(base: Path, relative: str) -> tuple[Path | None, str | None]:
    """The script's path inside ``base``, or why it cannot be used."""
    try:
        target = confine(base, relative)
    except PathEscape:
        return None, f"'{relative}' resolves outside the agent folder; keep scripts inside it"
    if not target.is_file():
        return None, f"'{relative}' does not exist (paths are relative to the agent folder)"
    return target, None


def _error(message: str, stage: str | None, fix: str) -> Finding:
    return Finding(SCRIPT_ERROR, "error", message, stage, fix)


def _shown(path: Path, base: Path) -> Path:
    """``path`` relative to the agent folder when it is inside it, for messages."""
    try:
        return path.relative_to(base)
    except ValueError:
        return path


def _tool_findings(base: Path) -> list[Finding]:
    _, skipped = discover_tools([base / "tools"], reserved=sorted(BUILTIN_TOOLS + SUBAGENT_TOOLS))
    findings = []
    for item in skipped:
        rel = _shown(Path(item.path), base)
        reason = item.reason
        if reason.startswith("Script"):
            findings.append(_error(
                f"tool script {rel} does not load: {reason}", None,
                "fix the script (or its // @tool / @param annotations) so it compiles",
            ))
        else:
            findings.append(Finding(
                TOOL_SKIPPED, "warning", f"tool script {rel} is skipped: {reason}", None,
                "rename the tool, or fix its @requires line",
            ))
    return findings


def _validator_findings(bp: Blueprint, base: Path) -> list[Finding]:
    specs = [(None, bp.agent.output)] + [(name, st.output) for name, st in bp.stages.items()]
    seen: set[str] = set()
    findings = []
    for stage, spec in specs:
        path = spec.validator if spec is not None else None
        if not path or path in seen:
            continue
        seen.add(path)
        target, problem = _locate(base, path)
        if problem:
            findings.append(_error(f"output validator {problem}", stage, "point validator at a .rhai file in the agent folder"))
            continue
        try:
            compile_validator(target, label=path)
        except ScriptError as exc:
            findings.append(_error(str(exc), stage, "the validator must define fn validate(content) and compile"))
    return findings


def _hook_findings(bp: Blueprint, base: Path) -> list[Finding]:
    findings = []
    for name, stage in bp.stages.items():
        if stage.hooks is None:
            continue
        by_file: dict[str, list[str]] = {}
        for hook, path in stage.hooks.model_dump().items():
            if path:
                by_file.setdefault(path, []).append(hook)
        for path, hooks in by_file.items():
            target, problem = _locate(base, path)
            if problem:
                findings.append(_error(f"hook script {problem}", name, "point the hook at a .rhai file in the agent folder"))
                continue
            try:
                compile_hooks(target, hooks, label=path)
            except ScriptError as exc:
                findings.append(_error(str(exc), name, f"define fn {hooks[0]}(ctx) (one parameter) in {path}"))
    return findings


def _region_findings(bp: Blueprint, base: Path) -> list[Finding]:
    layouts = [(None, bp.global_layout)] + [
        (name, st.own_layout) for name, st in bp.stages.items() if st.own_layout
    ]
    seen: set[str] = set()
    findings = []
    for stage, layout in layouts:
        for region in layout.values():
            if region.kind != "custom" or not region.script or region.script in seen:
                continue
            seen.add(region.script)
            target, problem = _locate(base, region.script)
            if problem:
                continue  # the hard checks already refuse unreadable or escaping region scripts
            try:
                compile_region_script(target, label=region.script)
            except ScriptError as exc:
                findings.append(_error(
                    f"region '{region.name}': {exc}", stage, "the script must define fn render(ctx) and compile",
                ))
    return findings


# What ``lev validate`` adds to the blueprint format's pipeline, in order.
CHECKS = (script_findings, isolation_findings)
