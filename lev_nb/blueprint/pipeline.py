"""The blueprint format's half of ``lev validate``: load, hard checks, lints -> :class:`Report`
(docs/blueprint.md#validation-and-lints).

Checks from the layers above are passed in as ``checks``: ``Callable[[Blueprint], list[Finding]]``
run after the lints. The full verdict of ``lev validate``, which also compiles the blueprint's Rhai
scripts, is composed this way by :func:`lev_nb.scripting.checks.validate` (and
:func:`lev_nb.verdict.validate`, ``lev_nb.validate``, on top of it).
A check may also raise :class:`BlueprintError` (kind "validation") to refuse the blueprint, as a
custom-region script that does not compile does upstream. Functions appended to
:data:`extra_checks` run after the given ``checks`` on every validation (a hook point for users).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from .checks import check, check_region_scripts
from .errors import BlueprintError
from .lints import LintEnv, lint
from .loader import load
from .model import Blueprint
from .report import Finding, Report, sort_findings

Check = Callable[[Blueprint], list[Finding]]
# The lint environment, or a function that builds it for the loaded blueprint (as the user's
# configuration does: lev_nb.settings.configured_lint_env).
EnvSpec = LintEnv | Callable[[Blueprint], LintEnv] | None
extra_checks: list[Check] = []


def refusal(exc: BlueprintError, deny_warnings: bool) -> Report:
    """The report of a blueprint that could not be parsed or failed the hard checks."""
    prefix = "parse error" if exc.kind == "parse" else "validation failed"
    return Report(error=f"{prefix}: {exc.detail}", deny_warnings=deny_warnings, exception=exc)


def validate_blueprint(bp: Blueprint, *, deny_warnings: bool = False, env: EnvSpec = None,
                       checks: Sequence[Check] = ()) -> Report:
    """Hard-check and lint an already loaded blueprint, then run ``checks`` and :data:`extra_checks`.

    ``env`` is the lint environment, a function of the blueprint that returns one, or None for
    :meth:`LintEnv.for_blueprint` (the user's configuration unknown).
    """
    try:
        check(bp)
        check_region_scripts(bp)
        findings = lint(bp, env(bp) if callable(env) else env)
        for hook in [*checks, *extra_checks]:
            findings.extend(hook(bp))
    except BlueprintError as exc:
        return refusal(exc, deny_warnings)
    return Report(findings=sort_findings(findings), blueprint=bp, deny_warnings=deny_warnings)


def validate_source(source: str | os.PathLike[str] | Blueprint, *, deny_warnings: bool = False,
                    env: EnvSpec = None, checks: Sequence[Check] = ()) -> Report:
    """Validate an agent folder, its agent.leviath, TOML text, or a loaded :class:`Blueprint`.

    A blueprint that cannot be parsed or fails the hard checks gives a report whose ``error`` is
    set; a manifest that is missing or unreadable raises :class:`BlueprintError` (kind "read"),
    as ``lev validate`` prints no report for it.
    """
    if isinstance(source, Blueprint):
        return validate_blueprint(source, deny_warnings=deny_warnings, env=env, checks=checks)
    try:
        bp = load(source)
    except BlueprintError as exc:
        if exc.kind == "read":
            raise
        return refusal(exc, deny_warnings)
    return validate_blueprint(bp, deny_warnings=deny_warnings, env=env, checks=checks)
