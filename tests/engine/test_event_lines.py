"""An event's line of events.jsonl, written by orjson from the dataclass itself, is byte for byte the
line its ``to_dict()`` gives: for every event class, and for the values orjson refuses."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from lev_nb.engine import events as ev
from lev_nb.engine.events import event_line
from lev_nb.store import encode_line


def _every_event_class(base: type = ev.Event) -> list[type]:
    found = []
    for cls in base.__subclasses__():
        found.append(cls)
        found.extend(_every_event_class(cls))
    return found


def _sample(cls: type) -> ev.Event:
    needed = {f.name: f"{f.name} of {cls.__name__}" for f in dataclasses.fields(cls)
              if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    return cls(**needed)


@pytest.mark.parametrize("cls", _every_event_class(), ids=lambda cls: cls.__name__)
def test_every_event_class_writes_the_line_its_dict_gives(cls: type) -> None:
    event = _sample(cls)
    line = event_line(event)
    assert line == encode_line(event.to_dict())
    assert json.loads(line)["type"] == cls.kind


def test_awkward_values_write_the_same_line() -> None:
    cases = [
        ev.ModelCall("r", "s", purpose="stage", provider="p", model="m", iteration=1, text="lone \udc80 surrogate"),
        ev.ModelCall("r", None, purpose="stage", provider="p", model="m", iteration=2**70),  # wider than 64 bits
        ev.ModelCall("r", "s", purpose="stage", provider="p", model=Path("a/b"), iteration=1),  # type: ignore[arg-type]
        ev.RunStarted("r", None, agent="a", task="ünïcode \n \"quoted\"", workdir="w"),
    ]
    for event in cases:
        assert event_line(event) == encode_line(event.to_dict())
        assert event_line(event).endswith(b"\n")


def test_an_event_line_reads_back_as_the_event() -> None:
    event = ev.StageEntered("r", "plan", visit=2, from_stage="draft")
    back = ev.event_from_dict(json.loads(event_line(event)))
    assert back == event or back.to_dict() == event.to_dict()
