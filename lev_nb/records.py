"""Records that are cheap to define: how lev_nb declares its dataclasses.

``@dataclass(frozen=True)`` compiles, from source, an ``__init__``, ``__repr__``, ``__eq__``,
``__hash__``, ``__setattr__`` and ``__delattr__`` for every class it decorates, about 0.1 ms each
at import time; over the hundred-odd value classes (run events, the run plan, the settings) that a
notebook's first ``bp.run`` imports, that was a fifth of its start-up. :func:`record` makes the same
kind of dataclass (``dataclasses.fields``, ``replace`` and ``asdict`` work as before; type checkers
see a frozen dataclass), but only ``__init__`` is generated per class: the other five are the shared
functions below, which read the class's fields and behave as the generated ones do.

Immutability: ``__init__`` assigns each field once; after that, assigning or deleting any
attribute raises :class:`dataclasses.FrozenInstanceError`, as on a frozen dataclass.
``@record(frozen=False)`` is the mutable kind (a run's state, its meta.json record, the messages of
a conversation being built), with the same shared ``__repr__`` and ``__eq__``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import FrozenInstanceError, dataclass
from typing import Any, Callable, TypeVar, dataclass_transform, overload

__all__ = ["record"]

T = TypeVar("T")


class _Names:
    """What the shared methods read of one record class's fields (worked out on first use)."""

    def __init__(self, cls: type) -> None:
        fields = dataclasses.fields(cls)
        self.all = frozenset(f.name for f in fields)
        self.compared = tuple(f.name for f in fields if f.compare)
        self.hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
        self.shown = tuple(f.name for f in fields if f.repr)


_NAMES: dict[type, _Names] = {}


def _names(cls: type) -> _Names:
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = _Names(cls)
    return names


def _setattr(self: Any, name: str, value: Any) -> None:
    # The generated __init__ is the only code that finds a field not yet set.
    if name in self.__dict__ or name not in _names(type(self)).all:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")
    object.__setattr__(self, name, value)


def _delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _names(type(self)).shown)
    return f"{type(self).__qualname__}({shown})"


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    names = _names(type(self)).compared
    return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)


def _hash(self: Any) -> int:
    return hash(tuple(getattr(self, n) for n in _names(type(self)).hashed))


@overload
def record(cls: type[T], /) -> type[T]: ...


@overload
def record(*, eq: bool = True, frozen: bool = True) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def record(cls: type[T] | None = None, /, *, eq: bool = True, frozen: bool = True) -> Any:
    """Make ``cls`` a dataclass, like ``@dataclass(frozen=frozen, eq=eq)``: immutable unless
    ``frozen=False``, compared by value unless ``eq=False`` (then by identity).

    As with ``@dataclass``, an ``__eq__`` makes a mutable record unhashable, and the methods the
    class body defines itself (``__repr__``, ``__eq__``, ``__hash__``) are kept.
    """

    def wrap(cls: type[T]) -> type[T]:
        own = dict(cls.__dict__)
        # A body that defines __eq__ gets __hash__ = None from Python itself: not a choice of its own.
        own_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
        cls = dataclass(cls, eq=False, repr=False)
        if frozen:
            cls.__setattr__ = _setattr  # type: ignore[method-assign]
            cls.__delattr__ = _delattr  # type: ignore[method-assign]
        if "__repr__" not in own:
            cls.__repr__ = _repr  # type: ignore[method-assign]
        if eq:
            if "__eq__" not in own:
                cls.__eq__ = _eq  # type: ignore[method-assign]
            if not own_hash:
                cls.__hash__ = _hash if frozen else None  # type: ignore[method-assign,assignment]
        return cls

    return wrap if cls is None else wrap(cls)
