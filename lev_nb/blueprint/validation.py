"""``lev validate`` as a function: load, hard checks, lints -> :class:`Report` (spec §8).

Hook point: append a ``Callable[[Blueprint], list[Finding]]`` to :data:`extra_checks` to add
findings after the lints (the scripting module uses it to compile tool, hook, validator and
custom-region scripts). A hook may also raise :class:`BlueprintError` (kind "validation") to
refuse the blueprint, as a custom-region script that does not compile does upstream.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from .checks import check, check_region_scripts
from .errors import BlueprintError
from .lints import LintEnv, lint
from .loader import load
from .model import Blueprint
from .report import Finding, Report, sort_findings
from .script_checks import script_findings

ExtraCheck = Callable[[Blueprint], list[Finding]]
extra_checks: list[ExtraCheck] = [script_findings]


def _refused(exc: BlueprintError, deny_warnings: bool) -> Report:
    prefix = "parse error" if exc.kind == "parse" else "validation failed"
    return Report(error=f"{prefix}: {exc.detail}", deny_warnings=deny_warnings, exception=exc)


def validate_blueprint(bp: Blueprint, *, deny_warnings: bool = False, env: LintEnv | None = None) -> Report:
    """Hard-check and lint an already loaded blueprint."""
    try:
        check(bp)
        check_region_scripts(bp)
        findings = lint(bp, env)
        for hook in list(extra_checks):
            findings.extend(hook(bp))
    except BlueprintError as exc:
        return _refused(exc, deny_warnings)
    return Report(findings=sort_findings(findings), blueprint=bp, deny_warnings=deny_warnings)


def validate(source: str | os.PathLike[str] | Blueprint, *, deny_warnings: bool = False,
             env: LintEnv | None = None) -> Report:
    """Validate an agent folder, its agent.leviath, TOML text, or a loaded :class:`Blueprint`.

    A blueprint that cannot be parsed or fails the hard checks gives a report whose ``error`` is
    set; a manifest that is missing or unreadable raises :class:`BlueprintError` (kind "read"),
    as ``lev validate`` prints no report for it.
    """
    if isinstance(source, Blueprint):
        return validate_blueprint(source, deny_warnings=deny_warnings, env=env)
    try:
        bp = load(source)
    except BlueprintError as exc:
        if exc.kind == "read":
            raise
        return _refused(exc, deny_warnings)
    return validate_blueprint(bp, deny_warnings=deny_warnings, env=env)
