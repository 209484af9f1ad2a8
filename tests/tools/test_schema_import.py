"""The first JSON Schema check does not pay for jsonschema's optional format libraries
(lev_nb.schemas.load_jsonschema, issue 27), and a user's own format checks still work."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
from support import ROOT

DEFERRED = ("rfc3987_syntax", "isoduration")


def fresh(code: str) -> dict:
    """Run ``code`` in a new interpreter with this repository first; return the JSON it prints."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not any(importlib.util.find_spec(m) for m in DEFERRED), reason="no heavy format library installed")
def test_the_first_check_imports_no_grammar_compiler_and_formats_still_check() -> None:
    found = fresh(
        "import json, sys\n"
        "from lev_nb.schemas import compile_schema\n"
        "v, why = compile_schema({'type': 'object', 'properties': {'a': {'type': 'string', 'format': 'iri'}}})\n"
        "errors = [e.message for e in v.iter_errors({'a': 1})]\n"
        f"loaded = [m for m in {DEFERRED!r} + ('lark', 'arrow') if m in sys.modules]\n"
        # The user's own format checker, in the same process, still checks iri and duration.
        "import jsonschema\n"
        "V, fc = jsonschema.Draft202012Validator, jsonschema.Draft202012Validator.FORMAT_CHECKER\n"
        "checks = [V({'format': f}, format_checker=fc).is_valid(x) for f, x in\n"
        "          [('iri', 'http://a.example/x'), ('iri', 'http://a b'), ('duration', 'P1D'), ('duration', 'P1X')]]\n"
        "real = [type(sys.modules[m]).__name__ for m in " + repr(DEFERRED) + " if m in sys.modules]\n"
        "print(json.dumps({'errors': errors, 'loaded': loaded, 'checks': checks, 'real': real}))\n"
    )
    assert found["errors"] == ["1 is not of type 'string'"]
    assert found["loaded"] == []
    expected = {"rfc3987_syntax": [True, False], "isoduration": [True, False]}
    checks = iter(found["checks"])
    for module, verdicts in expected.items():
        got = [next(checks), next(checks)]
        if importlib.util.find_spec(module):
            assert got == verdicts, module
    assert set(found["real"]) <= {"module"}  # the real libraries, loaded on first use


def test_a_jsonschema_imported_before_lev_nb_is_the_one_used() -> None:
    found = fresh(
        "import json, jsonschema\n"
        "from lev_nb.schemas import load_jsonschema\n"
        "print(json.dumps({'same': load_jsonschema() is jsonschema}))\n"
    )
    assert found["same"]


def test_a_stand_in_raises_what_jsonschema_expects(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("isoduration")
    from lev_nb.schemas import _Deferred

    stand_in = _Deferred("isoduration", ("parse_duration",), ("DurationParsingException",))
    monkeypatch.setitem(sys.modules, "isoduration", stand_in)
    with pytest.raises(stand_in.DurationParsingException) as caught:
        stand_in.parse_duration("P1X")
    real = sys.modules["isoduration"]
    assert real is not stand_in  # the real library took its place
    assert isinstance(caught.value.__cause__, real.DurationParsingException)
