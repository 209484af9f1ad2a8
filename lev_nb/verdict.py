"""The verdict on a blueprint on this install: what ``lev validate`` prints and ``lev_nb.validate``
returns, from one place.

The format's checks and lints (:mod:`lev_nb.blueprint.pipeline`) and the script compile checks
(:mod:`lev_nb.scripting.checks`) judge the blueprint itself; what depends on this install is added
here, under the user's configuration: which of the providers the blueprint names are configured
(the lint environment's ``available_providers``, so that ``no-reachable-provider`` fires as the
upstream's does) and the model each stage would start on (:func:`stage_models`, the report's
``models``, printed as "Models this install would use:" and under the ``models`` key of
``lev validate --json``). A configuration that cannot be read gives the checks their "unknown"
forms and no ``models``.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from lev_nb.blueprint.lints import LintEnv
from lev_nb.blueprint.model import Blueprint
from lev_nb.blueprint.report import Report
from lev_nb.settings import ConfigError, Settings, current, lint_env

__all__ = ["validate", "validate_blueprint", "install_env", "read_settings", "stage_models", "start_models", "models_text"]


def read_settings() -> tuple[Settings | None, str | None]:
    """The user's configuration, or ``(None, why)`` when it cannot be read."""
    try:
        return current(), None
    except ConfigError as exc:
        return None, str(exc)


def install_env(bp: Blueprint, settings: Settings | None) -> LintEnv:
    """The lint environment of ``bp`` under ``settings`` (None: the "unknown" form), with the
    providers the blueprint names that are configured here (:func:`~lev_nb.providers.resolve.is_configured`)
    and the model each stage would start on (the engine's own choice, :func:`start_models`)."""
    from lev_nb.engine.model_choice import default_model
    from lev_nb.providers.resolve import is_configured

    env = lint_env(bp, settings)
    if settings is None:
        return env
    named = {ref.provider for st in bp.stages.values() for ref in st.models}
    provider, model = default_model(settings)
    starts: dict[str, str | None] = {}

    def start_model(stage: str) -> str | None:  # asked only of a blueprint that passed the hard checks
        if not starts:
            starts.update(start_models(bp, settings))
        return starts.get(stage)

    return dataclasses.replace(env, available_providers=frozenset(p for p in named if is_configured(p, settings)),
                               default_model=f"{provider}/{model}", start_model=start_model)


def start_models(bp: Blueprint, settings: Settings) -> dict[str, str | None]:
    """stage -> the ``provider/model`` it would start on under ``settings``, or None when that
    model's provider is not configured here (or none is allowed): the run would stop at launch."""
    from lev_nb.engine.model_choice import pick_model
    from lev_nb.engine.plan.build import stage_plans
    from lev_nb.providers.resolve import is_configured

    out: dict[str, str | None] = {}
    for stage in stage_plans(bp):
        pick = pick_model(stage, settings)
        usable = pick.refusal is None and is_configured(pick.provider, settings)
        out[stage.name] = f"{pick.provider}/{pick.model}" if usable else None
    return out


def stage_models(bp: Blueprint, settings: Settings) -> dict[str, Any]:
    """The model each stage would start on under ``settings``, as the ``models`` value of
    ``lev validate --json``: ``{"default_provider", "default_model", "stages": [{"stage", "model"
    (``provider/model``, None when refused), "missing_key" (the variable to set, or None),
    "refused" (why no model is allowed, or None), "blueprint_order" (the stage's own list)}]}``."""
    from lev_nb.engine.model_choice import pick_model
    from lev_nb.engine.plan.build import stage_plans
    from lev_nb.providers.resolve import missing_key

    stages = []
    for stage in stage_plans(bp):
        pick = pick_model(stage, settings)
        refused = pick.refusal
        stages.append({
            "stage": stage.name,
            "model": None if refused is not None else f"{pick.provider}/{pick.model}",
            "missing_key": None if refused is not None else missing_key(pick.provider, settings),
            "refused": refused,
            "blueprint_order": [f"{c.provider}/{c.model}" for c in stage.models],
        })
    return {"default_provider": settings.default_provider, "default_model": settings.default_model, "stages": stages}


def models_text(models: dict[str, Any]) -> str:
    """"Models this install would use:" with one line per stage (and the blueprint's own order
    under it where the two differ), from :func:`stage_models`."""
    rows = models["stages"]
    width = max([len(row["stage"]) for row in rows] + [14]) + 2
    lines = ["Models this install would use:"]
    for row in rows:
        if row["refused"] is not None:
            shown = f"none: {row['refused']}"
        elif row["missing_key"]:
            shown = f"{row['model']}  (no key here: set {row['missing_key']})"
        else:
            shown = row["model"]
        lines.append(f"  {row['stage'].ljust(width)} {shown}")
        order = row["blueprint_order"]
        if order and order[0] != row["model"]:
            listed = ", ".join(order[:3]) + (", ..." if len(order) > 3 else "")
            lines.append(f"  {' ' * width}   blueprint order: {listed}")
    lines.append(f"  default_provider = {models['default_provider']}, "
                 f"default_model = {models['default_model'] or '(unset)'}")
    return "\n".join(lines)


def validate(source: str | os.PathLike[str] | Blueprint, *, deny_warnings: bool = False,
             env: LintEnv | None = None) -> Report:
    """Validate an agent folder, its agent.leviath, TOML text, an agent's name or a loaded
    :class:`~lev_nb.blueprint.Blueprint` as ``lev validate`` does: the hard checks, the lints (under
    the user's configuration unless ``env`` is given, ``no-reachable-provider`` included), the
    script compile checks, and ``report.models``, the model each stage would start on here."""
    from lev_nb.scripting import checks

    settings, _ = read_settings()
    report = checks.validate(source, deny_warnings=deny_warnings,
                             env=env if env is not None else lambda bp: install_env(bp, settings))
    return _with_models(report, settings)


def validate_blueprint(bp: Blueprint, *, deny_warnings: bool = False, env: LintEnv | None = None) -> Report:
    """:func:`validate` for an already loaded blueprint."""
    from lev_nb.scripting import checks

    settings, _ = read_settings()
    report = checks.validate_blueprint(bp, deny_warnings=deny_warnings,
                                       env=env if env is not None else install_env(bp, settings))
    return _with_models(report, settings)


def _with_models(report: Report, settings: Settings | None) -> Report:
    if settings is not None and report.error is None and report.blueprint is not None:
        report.models = stage_models(report.blueprint, settings)
    return report
