"""Reading one field of a run record that may come from another version, or be damaged: a value
of the wrong type reads as empty (never an exception in the middle of telling a run)."""

from __future__ import annotations

from typing import Any

__all__ = ["as_dict", "as_int", "as_cost"]


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is an object, else an empty one."""
    return value if isinstance(value, dict) else {}


def as_int(value: Any) -> int:
    """``value`` when it is a whole number (not a bool), else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def as_cost(value: Any) -> float | None:
    """``value`` as dollars, or None when it is not a number (no price was known)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
