"""The format reference is complete and its examples are real: every blueprint key has a line in
lev_nb.blueprint.keydocs and no line names a key that is gone, and every blueprint written in the
guides loads and validates without errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import lev_nb
from docs_support import DOCS, reference_hook
from lev_nb.blueprint import keydocs
from lev_nb.blueprint import model as M


def _documented_models() -> list[type]:
    """The table models the generated reference shows."""
    text = reference_hook().blueprint_reference()
    names = set(re.findall(r"\{#bp-(\w+)\}", text))
    models = [cls for cls in vars(M).values() if isinstance(cls, type) and cls.__name__.lower() in names]
    assert len(models) == len(names) > 20
    return models


def test_every_key_has_a_description() -> None:
    missing = []
    for cls in _documented_models():
        for name, info in cls.model_fields.items():
            if not info.exclude and not info.description and name not in keydocs.KEY_DOCS.get(cls.__name__, {}):
                missing.append(f"{cls.__name__}.{name}")
    assert not missing, "keys with no line in lev_nb/blueprint/keydocs.py: " + ", ".join(missing)


def test_no_description_names_a_key_that_is_gone() -> None:
    stale = []
    for model, keys in keydocs.KEY_DOCS.items():
        cls = getattr(M, model, None)
        if cls is None:
            stale.append(model)
            continue
        stale += [f"{model}.{key}" for key in keys if key not in cls.model_fields]
    assert not stale, stale


def test_the_blueprints_in_the_guides_are_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    # On an install that can reach the providers they name (no-reachable-provider is about the install).
    for variable in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.setenv(variable, "sk-placeholder")
    blocks = []
    for page in sorted(DOCS.glob("*.md")):
        for block in re.findall(r"```toml\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
            if "[agent]" in block:
                blocks.append((page.name, block))
    assert blocks
    for page, block in blocks:
        report = lev_nb.validate(lev_nb.load(block))
        assert report.valid and not report.warnings, f"{page}:\n{report}"


def test_the_configuration_in_the_guides_is_read_without_a_warning(tmp_path: Path) -> None:
    """Every ``config.toml`` sample of the guides loads, and no key in it is unknown or ignored."""
    from lev_nb.settings.loader import load

    samples = []
    for page in ("configuration.md", "providers.md", "mcp.md", "observability.md"):
        samples += re.findall(r"```toml\n(.*?)```", (DOCS / page).read_text(encoding="utf-8"), re.S)
    assert len(samples) >= 4
    for number, sample in enumerate(samples):
        path = tmp_path / f"config-{number}.toml"
        path.write_text(sample, encoding="utf-8")
        settings = load(path, environ={})
        assert not settings.warnings, f"{sample}\n{settings.warnings}"
