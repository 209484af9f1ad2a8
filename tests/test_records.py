"""``@record``: dataclasses whose compiled ``__init__`` and shared methods behave as ``@dataclass``'s
(frozen ones stay immutable), and the run events built on it keep their events.jsonl form."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import FrozenInstanceError, dataclass, field

import pytest

from lev_nb.engine import events as ev
from lev_nb.engine.plan.types import StagePlan
from lev_nb.records import record
from lev_nb.settings.model import Settings


@record
class Point:
    x: int
    y: int = 0
    tags: tuple[str, ...] = ()
    note: str = field(default="", compare=False, repr=False)


@dataclass(frozen=True)
class Reference:  # the standard library's frozen dataclass, with the same fields
    x: int
    y: int = 0
    tags: tuple[str, ...] = ()
    note: str = field(default="", compare=False, repr=False)


@record
class Labelled(Point):
    label: str = ""

    def __repr__(self) -> str:
        return f"<{self.label}>"


@record(frozen=False)
class Tally:
    name: str
    count: int = 0


@dataclass
class TallyReference:
    name: str
    count: int = 0


@record
class Checked:
    """A record whose __post_init__ normalises a field, with a keyword-only one."""

    name: str
    at: float = field(default=0.0, kw_only=True)
    seen: list[str] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.name.lower())


@record(eq=False)
class Happened:
    what: str
    items: list[str] = field(default_factory=list)


def test_a_record_cannot_change_after_init() -> None:
    for value in (Point(1), Labelled(1, label="a"), Happened("x"), ev.Nudge("r", None, reason="a", text="b"),
                  StagePlan(name="s", index=0), Settings()):
        name = dataclasses.fields(value)[0].name
        with pytest.raises(FrozenInstanceError):
            setattr(value, name, 1)
        with pytest.raises(FrozenInstanceError):
            delattr(value, name)
        with pytest.raises(FrozenInstanceError):
            value.extra = 1  # type: ignore[union-attr]
    assert Point(1).x == 1


def test_a_record_behaves_as_a_frozen_dataclass() -> None:
    one, ref = Point(1, 2, ("a",), note="n"), Reference(1, 2, ("a",), note="n")
    assert repr(one) == repr(ref).replace("Reference", "Point") == "Point(x=1, y=2, tags=('a',))"
    assert one == Point(1, 2, ("a",), note="other") and one != Point(1, 3) and one != ref
    assert hash(one) == hash(Point(1, 2, ("a",))) == hash(ref)
    assert {one: "kept"}[Point(1, 2, ("a",))] == "kept"
    assert dataclasses.replace(one, y=5) == Point(1, 5, ("a",))
    assert dataclasses.asdict(one) == dataclasses.asdict(ref)
    assert [f.name for f in dataclasses.fields(Labelled)] == ["x", "y", "tags", "note", "label"]
    assert str(inspect.signature(Point)) == str(inspect.signature(Reference))
    with pytest.raises(TypeError):
        Point()  # type: ignore[call-arg]


def test_a_records_init_has_the_dataclass_parameters() -> None:
    checked = Checked("ABC", at=2.0)
    assert (checked.name, checked.at, checked.seen) == ("abc", 2.0, [])
    assert str(inspect.signature(Checked)) == "(name: 'str', *, at: 'float' = 0.0) -> None"
    with pytest.raises(TypeError):
        Checked("abc", 2.0)  # type: ignore[misc]


def test_a_records_own_methods_are_kept_and_eq_false_compares_by_identity() -> None:
    assert repr(Labelled(1, label="a")) == "<a>"
    assert Labelled(1, label="a") == Labelled(1, label="a") != Labelled(1, label="b")
    first = Happened("x")
    assert first != Happened("x") and first == first
    assert len({first, Happened("x")}) == 2
    assert first.items == [] and first.items is not Happened("x").items


def test_events_keep_their_events_jsonl_form() -> None:
    call = ev.ModelCall("run-1", "work", purpose="stage", provider="mock", model="m", iteration=2, ts=5.0)
    assert list(call.to_dict().items()) == [
        ("type", "model_call"), ("run_id", "run-1"), ("stage", "work"), ("ts", 5.0), ("purpose", "stage"),
        ("provider", "mock"), ("model", "m"), ("iteration", 2), ("prompt_tokens", 0), ("completion_tokens", 0),
        ("tool_calls", 0), ("text", ""), ("error", None), ("cached_tokens", 0), ("cache_write_tokens", 0),
        ("cost_usd", None), ("started_at", None),
    ]
    entered = ev.StageEntered("run-1", "work", visit=1, ts=6.0)
    assert list(entered.to_dict().items()) == [
        ("type", "stage_entered"), ("run_id", "run-1"), ("stage", "work"), ("ts", 6.0), ("visit", 1),
        ("from_stage", None),
    ]
    back = ev.event_from_dict(call.to_dict())
    assert type(back) is ev.ModelCall and back.to_dict() == call.to_dict()
    assert repr(entered) == "StageEntered(run_id='run-1', stage='work', ts=6.0, visit=1, from_stage=None)"


def test_a_mutable_record_behaves_as_a_dataclass() -> None:
    tally, ref = Tally("a"), TallyReference("a")
    tally.count += 1
    ref.count += 1
    assert repr(tally) == repr(ref).replace("TallyReference", "Tally") == "Tally(name='a', count=1)"
    assert tally == Tally("a", 1) != Tally("a") and tally != ref
    assert Tally.__hash__ is None is TallyReference.__hash__  # mutable and compared by value: unhashable
