"""lev_nb.environ.env_value answers as os.environ.get does, whatever the variable holds."""

from __future__ import annotations

import os

import pytest

from lev_nb.environ import env_value


@pytest.mark.parametrize("value", ["plain", "", "naïve ☃", "spaces  and\ttabs", "a=b=c"])
def test_env_value_is_what_os_environ_holds(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEV_TEST_VALUE", value)
    assert env_value("LEV_TEST_VALUE") == os.environ.get("LEV_TEST_VALUE") == value
    monkeypatch.delenv("LEV_TEST_VALUE")
    assert env_value("LEV_TEST_VALUE") is None


def test_env_value_keeps_bytes_that_are_not_text(monkeypatch: pytest.MonkeyPatch) -> None:
    # An environment inherited from elsewhere may hold bytes that do not decode: os.environ keeps
    # them as surrogate escapes, and so does env_value.
    monkeypatch.setenv("LEV_TEST_RAW", os.fsdecode(b"caf\xe9"))
    assert env_value("LEV_TEST_RAW") == os.environ["LEV_TEST_RAW"]


def test_env_value_reads_a_replaced_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # A test (or an embedding program) may put a plain mapping in os.environ's place.
    monkeypatch.setattr(os, "environ", {"LEV_TEST_SWAPPED": "yes"})
    assert env_value("LEV_TEST_SWAPPED") == "yes"
    assert env_value("PATH") is None
