"""The documentation site builds with ``mkdocs build --strict`` (a broken link, a missing anchor or
an API object that cannot be found fails the build), offline, and holds the generated references."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from docs_support import DOCS, ROOT


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               NO_MKDOCS_2_WARNING="1")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def _page(site: Path, page: str) -> str:
    return (site / page / "index.html").read_text(encoding="utf-8")


def test_every_guide_is_built(site: Path) -> None:
    for page in ("getting-started", "concepts", "blueprint", "runs", "notebook", "rhai", "providers",
                 "configuration", "security", "evaluation", "mcp", "observability", "cli"):
        assert "<h1" in _page(site, page), page
    assert (site / "index.html").is_file()


def test_the_references_are_generated_from_the_code(site: Path) -> None:
    from lev_nb.blueprint.model import Edge, Stage
    from lev_nb.cli import build_parser
    from lev_nb.settings.schema import static_keys

    blueprint = _page(site, "reference/blueprint")
    for key in list(Stage.model_fields) + list(Edge.model_fields):
        if not (Stage.model_fields.get(key) or Edge.model_fields[key]).exclude:
            assert f"<code>{key}</code>" in blueprint, key
    configuration = _page(site, "reference/configuration")
    for key, _ in static_keys():
        assert f"<code>{key[-1]}</code>" in configuration, ".".join(key)
    cli = _page(site, "reference/cli")
    commands = [a for a in build_parser()._actions if a.dest == "command"][0].choices
    for name in commands:
        assert f'id="lev-{name}"' in cli, name
    assert "--output-format" in cli and "--&lt;input&gt;" in cli


def test_the_api_reference_documents_the_public_api(site: Path) -> None:
    api = _page(site, "reference/api")
    for name in ("lev_nb.engine.handle.Run", "lev_nb.providers.base.Provider", "lev_nb.catalog.load",
                 "lev_nb.engine.api.start_run", "lev_nb.rhai.Engine"):
        assert f'id="{name}"' in api, name
    assert ":class:" not in api and "<code>~" not in api  # Sphinx roles are dropped, the code spans stay


def test_the_images_are_shown(site: Path) -> None:
    pages = "".join(p.read_text(encoding="utf-8") for p in site.rglob("*.html"))
    for image in sorted((DOCS / "images").iterdir()):
        assert f"images/{image.name}" in pages, image.name
        assert (site / "images" / image.name).is_file()


def test_the_site_fetches_nothing_from_the_internet(site: Path) -> None:
    """No web fonts or remote scripts: the site reads the same offline."""
    index = (site / "index.html").read_text(encoding="utf-8")
    assert "fonts.googleapis.com" not in index and "fonts.gstatic.com" not in index
    for tag in ("<script src=\"http", "<link rel=\"stylesheet\" href=\"http"):
        assert tag not in index
