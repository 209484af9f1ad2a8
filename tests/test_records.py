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


@record(frozen=False, slots=True)
class Slotted:
    name: str
    count: int = 0
    seen: list[str] = field(default_factory=list)


def test_a_slotted_record_holds_its_fields_without_a_dict_and_still_behaves_as_a_dataclass() -> None:
    import copy
    import pickle

    tallies = [Slotted("a") for _ in range(12)]  # past the field loop: the compiled __init__ too
    first = tallies[0]
    assert not hasattr(first, "__dict__") and Slotted.__slots__ == ("name", "count", "seen")
    first.count += 1
    first.seen.append("x")
    assert first == Slotted("a", 1, ["x"]) and tallies[-1] == Slotted("a") and tallies[1].seen == []
    assert repr(first) == "Slotted(name='a', count=1, seen=['x'])"
    assert pickle.loads(pickle.dumps(first)) == first == copy.deepcopy(first)
    assert dataclasses.replace(first, count=5).count == 5 and dataclasses.asdict(first)["seen"] == ["x"]
    with pytest.raises(AttributeError):
        first.other = 1  # type: ignore[attr-defined]


def _record_kinds() -> list[type]:
    """Fresh record classes of every field form: a class made anew has not compiled its __init__."""

    @record
    class Plain:
        a: int
        b: str = "b"
        items: list[int] = field(default_factory=list)
        later: int = field(default=7, init=False)
        made: list[str] = field(default_factory=lambda: ["x"], init=False)
        key: str = field(default="k", kw_only=True)
        need: int = field(kw_only=True)

    @record(frozen=False)
    class Mutable:
        a: int
        b: int = 2
        items: list[int] = field(default_factory=list, init=False)

        def __setattr__(self, name: str, value: object) -> None:  # the fields go through it, as on a dataclass
            object.__setattr__(self, name, value)
            type(self).log.append((name, value))

    Mutable.log = []  # type: ignore[attr-defined]

    @record
    class Posted:
        a: int
        doubled: int = field(default=0, init=False)

        def __post_init__(self) -> None:
            object.__setattr__(self, "doubled", self.a * 2)

    @record
    class Child(Posted):
        b: str = "c"

    return [Plain, Mutable, Posted, Child]


CALLS: list[tuple[tuple[object, ...], dict[str, object]]] = [
    ((1,), {"need": 2}), ((1, "x", [3]), {"need": 2, "key": "z"}), ((), {"a": 1, "need": 2}),
    ((1,), {}), ((1, "x", [3], 4), {"need": 2}), ((1,), {"need": 2, "nope": 0}), ((1,), {"a": 1, "need": 2}),
    ((1,), {"need": 2, "later": 3}), ((1,), {"self": 1, "need": 2}), ((5,), {}), ((5, 6), {}), ((), {"a": 5, "b": "q"}),
]


def _outcome(cls: type, args: tuple[object, ...], kwargs: dict[str, object]) -> object:
    log = getattr(cls, "log", [])
    log.clear()
    try:
        made = cls(*args, **kwargs)
    except TypeError as exc:
        return ("TypeError", str(exc), list(log))
    return (repr(made), {name: getattr(made, name) for name in vars(made)}, list(log))


def test_a_records_first_instances_are_made_as_its_compiled_init_makes_them() -> None:
    """Every call form (given, defaulted, factory-made, init=False, keyword-only, __post_init__,
    a class's own __setattr__, and each kind of wrong call) gives what the compiled ``__init__``
    gives: the same fields, the same order of assignments and the same error message."""
    loops_used = 0
    for args, kwargs in CALLS:
        looped, compiled = _record_kinds(), _record_kinds()  # fresh classes for each call
        for cls in compiled:
            assert inspect.signature(cls.__init__)  # looking the function up compiles it
        for fresh, ready in zip(looped, compiled):
            assert _outcome(fresh, args, kwargs) == _outcome(ready, args, kwargs), (fresh.__name__, args, kwargs)
            loops_used += not inspect.isfunction(fresh.__dict__["__init__"])  # bound: not compiled
    assert loops_used >= 10


def test_a_record_compiles_its_init_after_a_few_instances_and_when_it_is_looked_up() -> None:
    [plain, mutable, *_] = _record_kinds()
    for count in range(8):
        plain(count, need=0)
    assert not inspect.isfunction(plain.__dict__["__init__"])
    plain(8, need=0)
    assert inspect.isfunction(plain.__dict__["__init__"])
    assert list(inspect.signature(mutable).parameters) == ["a", "b"]
    assert inspect.isfunction(mutable.__dict__["__init__"])
