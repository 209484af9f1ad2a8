"""Writing a :class:`Blueprint` back as TOML (only the keys the blueprint wrote, plus mode sugar)."""

from __future__ import annotations

from typing import Any

import tomli_w

from .model import Blueprint, Region


def _strip_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_none(v) for v in value if v is not None]
    return value


def _fix_seeds(dumped: dict[str, Any], regions: dict[str, Region]) -> None:
    for name, region in regions.items():
        if region.seed is not None and name in dumped and "seed" in dumped[name]:
            dumped[name]["seed"] = region.seed.to_toml_value()


def blueprint_to_dict(bp: Blueprint) -> dict[str, Any]:
    """The TOML-ready dict of a blueprint: what it wrote, with defaults left out."""
    data = bp.model_dump(exclude_unset=True, by_alias=True)
    if "context" in data and "regions" in data["context"]:
        _fix_seeds(data["context"]["regions"], bp.context.regions)
    for name, stage in bp.stages.items():
        dumped = data.get("stages", {}).get(name, {})
        if stage.context is not None and "context" in dumped and "regions" in dumped["context"]:
            _fix_seeds(dumped["context"]["regions"], stage.context.regions)
    return _strip_none(data)


def blueprint_to_toml(bp: Blueprint) -> str:
    """Serialize with tomli-w; loading the text gives a blueprint equal to ``bp``."""
    return tomli_w.dumps(blueprint_to_dict(bp))
