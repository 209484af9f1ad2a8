"""The blueprint's tables (lev_nb.blueprint.table): immutable, they remember which keys were written,
keep a lenient table's unknown keys, dump and copy, survive pickling (Dask ships blueprints to its
workers), and cost no pydantic import (the cold start of ``lev validate`` and a first run)."""

from __future__ import annotations

import copy
import json
import re
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lev_nb.blueprint import Blueprint, load
from lev_nb.blueprint.model import Edge, Gate, OutputSpec, Region, RoutingOverride, Stage, construct
from lev_nb.blueprint.table import FrozenTable

ROOT = Path(__file__).resolve().parents[2]
TRIAGE = ROOT / "blueprints" / "triage"


def test_a_table_is_immutable_and_says_how_to_change_it() -> None:
    gate = Gate(max_attempts=2)
    with pytest.raises(FrozenTable, match=r"model_copy\(update="):
        gate.max_attempts = 3  # type: ignore[misc]
    with pytest.raises(FrozenTable):
        del gate.max_attempts
    assert gate.model_copy(update={"max_attempts": 3}).max_attempts == 3 and gate.max_attempts == 2


def test_written_keys_aliases_and_unknown_keys() -> None:
    spec = OutputSpec(schema={"type": "object"}, colour="blue")  # lenient: the unknown key is kept
    assert spec.json_schema == {"type": "object"}
    assert spec.model_fields_set == {"json_schema", "colour"}
    assert spec.model_extra == {"colour": "blue"} and spec.extra == {"colour": "blue"}
    assert spec.colour == "blue"  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="no key 'colour'"):
        Gate(colour="blue")  # type: ignore[call-arg]  # strict: refused, with the keys it has
    with pytest.raises(TypeError, match="needs the key 'target'"):
        Edge()  # type: ignore[call-arg]
    with pytest.raises(AttributeError):
        Gate().colour  # type: ignore[attr-defined]


@pytest.mark.parametrize(("build", "message"), [
    (lambda: Region(name="r", kind="bogus"), "Region.kind must be one of 'temporary', 'pinned', "),
    (lambda: Gate(max_attempts="3"), "Gate.max_attempts must be int or None, not '3'"),
    (lambda: Gate(max_attempts=True), "Gate.max_attempts must be int or None, not True"),
    (lambda: Gate(require_regions=["notes", 1]), "Gate.require_regions must be a list of str"),
    (lambda: OutputSpec(schema="{}"), "OutputSpec.schema must be a table of anything or None"),
])
def test_a_table_built_by_hand_checks_its_values(build: Any, message: str) -> None:
    with pytest.raises(TypeError, match=re.escape(message)):
        build()


def test_model_dump_follows_what_was_written() -> None:
    region = construct(Region, name="notes", kind="pinned", max_tokens=100, colour="blue")
    dumped = region.model_dump()
    assert "name" not in dumped  # taken from the table's own key, never a key inside it
    assert dumped["kind"] == "pinned" and dumped["volatility"] == "rewritten" and dumped["colour"] == "blue"
    assert region.model_dump(exclude_unset=True) == {"kind": "pinned", "max_tokens": 100, "colour": "blue"}
    assert "budget" not in region.model_dump(exclude_none=True)
    spec = OutputSpec(schema={"type": "object"})
    assert spec.model_dump(by_alias=True, exclude_unset=True) == {"schema": {"type": "object"}}
    assert spec.model_dump(exclude_unset=True) == {"json_schema": {"type": "object"}}


def test_a_loaded_blueprint_pickles_copies_and_compares_with_its_provenance() -> None:
    bp = load(TRIAGE)
    for twin in (pickle.loads(pickle.dumps(bp)), copy.deepcopy(bp), copy.copy(bp)):
        assert twin == bp and twin.source_path == bp.source_path and twin.raw == bp.raw
        assert twin.stages["read"].model_fields_set == bp.stages["read"].model_fields_set
        assert twin.to_toml() == bp.to_toml()
    with pytest.raises(FrozenTable):
        bp.agent = None  # type: ignore[misc]
    with pytest.raises(AttributeError, match="no private attribute _colour"):
        bp.set_private(_colour="blue")


def test_equality_hash_and_repr_are_by_value() -> None:
    assert Gate(max_attempts=2) == Gate(max_attempts=2) and Gate(max_attempts=2) != Gate(max_attempts=3)
    assert hash(RoutingOverride(region="r")) == hash(RoutingOverride(region="r"))
    with pytest.raises(TypeError):
        hash(Gate())  # holds lists
    assert Gate(message="m") != Edge(target="x")
    assert repr(Gate(message="m")).startswith("Gate(require_modifications=False, require_regions=[], ")
    with pytest.raises(TypeError):
        hash(load(TRIAGE))  # a blueprint holds dicts: unhashable, as before


def test_model_fields_describe_each_key() -> None:
    fields = Stage.model_fields
    assert fields["name"].exclude and fields["name"].is_required()
    assert fields["available_tools"].get_default() == [] and not fields["available_tools"].is_required()
    assert OutputSpec.model_fields["json_schema"].alias == "schema"
    assert str(Stage.model_fields["mode"].annotation).startswith("typing.Literal['autonomous'")
    assert Stage.model_config == {"frozen": True, "extra": "forbid"}
    assert Blueprint.model_config["extra"] == "allow"


def test_validating_and_a_first_mock_run_import_no_pydantic(tmp_path: Path) -> None:
    code = (
        "import json, sys, lev_nb\n"
        f"report = lev_nb.validate({str(TRIAGE)!r})\n"
        "validated = [m for m in ('pydantic', 'pydantic_core') if m in sys.modules]\n"
        f"run = lev_nb.load({str(TRIAGE)!r}).run('t', model='mock', workdir={str(tmp_path / 'w')!r})\n"
        "run.wait(60)\n"
        "print(json.dumps({'valid': report.valid, 'status': run.status, 'validated': validated,\n"
        "  'ran': [m for m in ('pydantic', 'pydantic_core', 'anthropic', 'openai') if m in sys.modules]}))\n"
    )
    env = {"LEV_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {"valid": True, "status": "complete", "validated": [], "ran": []}
