"""Issue 25: `lev doctor` checks this install end to end, the first failure being the diagnosis,
and leaves nothing in the run store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from standin import API_KEY, Reply, StandIn, message, serve, text, tool_use


@pytest.fixture
def standin() -> Iterator[StandIn]:
    yield from serve()


def _checks(done) -> dict[str, dict]:
    return {c["name"]: c for c in json.loads(done.stdout)["checks"]}


def test_offline_on_the_mock(lev, home: Path) -> None:
    done = lev("doctor", "--model", "mock")
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("config", "rhai", "store", "resolve", "run"):
        assert f"  {name}" in done.stdout and "FAIL" not in done.stdout
    assert "doctor passed" in done.stdout
    assert not (home / "runs").exists() or not list((home / "runs").iterdir())  # the run was thrown away


def test_a_missing_key_is_the_diagnosis(lev, home: Path) -> None:
    done = lev("doctor", "--json")
    assert done.returncode == 1
    checks = _checks(done)
    assert checks["config"]["ok"] and checks["rhai"]["ok"] and checks["store"]["ok"]
    assert checks["resolve"]["ok"] is False and "ANTHROPIC_API_KEY is not set" in checks["resolve"]["detail"]
    assert checks["run"]["ok"] is None  # not run after a failure
    assert checks["sandbox"]["ok"] and checks["jupyter"]["ok"]  # informative only
    assert json.loads(done.stdout)["passed"] is False


def test_a_broken_configuration_stops_at_config(lev, home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[limits]\nmax_concurrent_inferences = 'many'\n")
    done = lev("doctor", "--model", "mock")
    assert done.returncode == 1 and "doctor failed at config" in done.stderr
    assert "config    FAIL" in done.stdout and "expected a whole number" in done.stdout


def test_one_real_call_through_the_sdk(lev, home: Path, standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", standin.url)
    standin.queue(Reply(body=message(tool_use("t1", "submit_output", {"content": "PONG"}), stop="tool_use")),
                  Reply(body=message(text("Done."))))
    done = lev("doctor", "--json")
    checks = _checks(done)
    assert done.returncode == 0, checks
    assert checks["resolve"]["detail"].startswith("anthropic/")
    assert "answered 'PONG'" in checks["run"]["detail"] and "2 call(s)" in checks["run"]["detail"]
    assert len(standin.requests) == 2 and not (home / "runs").exists()
    none = lev("doctor", "--no-run", "--json")
    assert "run" not in _checks(none) and len(standin.requests) == 2  # --no-run bills nothing
