"""Circuit breakers, one per ``provider/model`` in this process
(docs/providers.md#fallback-and-circuit-breakers, circuit.rs).

A model whose calls fail as unusable (credits, auth, unknown model, unreachable after retries)
``failures_before_open`` times in a row is not called for ``cooldown_s``: its calls fail at once
with the error that opened the circuit, so a batch of runs moves to its fallbacks (or pauses)
without each one waiting on a dead endpoint. After the cool-down one call goes through as a
probe: its success closes the circuit, its failure opens it again. Any success resets the count.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from lev_nb.providers.base import ProviderError
from lev_nb.records import record

__all__ = ["CIRCUITS", "CircuitBreakers", "CircuitRefusal"]


@record(frozen=False)
class _Circuit:
    """How one model's calls have gone lately: failures in a row, open until when, a probe out."""

    failures: int = 0
    open_until: float = 0.0  # monotonic seconds
    probing: bool = False
    kind: str = "api"
    message: str = ""


@record
class CircuitRefusal:
    """A call refused by an open circuit: the error to fail it with, and how the circuit stands."""

    error: ProviderError
    failures: int
    cooldown_s: float


class CircuitBreakers:
    """Every model's circuit in this process; thread-safe. ``clock`` is for tests."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._circuits: dict[str, _Circuit] = {}

    def before_call(self, key: str, threshold: int) -> CircuitRefusal | None:
        """None when a call to ``key`` may go ahead (the one probe after a cool-down included),
        else the refusal to fail it with at once."""
        if threshold <= 0:
            return None  # the breaker is off
        with self._lock:
            circuit = self._circuits.get(key)
            if circuit is None or circuit.failures < threshold:
                return None
            left = circuit.open_until - self._clock()
            if left <= 0 and not circuit.probing:
                circuit.probing = True
                return None
            wait = f"another {left:.0f} s" if left > 0 else "until a probe call now in flight returns"
            error = ProviderError(
                circuit.kind,
                f"{key} is not called for {wait}: it failed {circuit.failures} times in a row "
                f"(last: {circuit.message})",
            )
            return CircuitRefusal(error, circuit.failures, max(0.0, left))

    def closed_in(self, key: str, threshold: int) -> float:
        """Seconds until a call to ``key`` may go ahead (0: now, or a probe may be made), without
        taking the probe; a probe in flight counts as a short wait."""
        if threshold <= 0:
            return 0.0
        with self._lock:
            circuit = self._circuits.get(key)
            if circuit is None or circuit.failures < threshold:
                return 0.0
            left = circuit.open_until - self._clock()
            if left <= 0:
                return 1.0 if circuit.probing else 0.0
            return left

    def success(self, key: str) -> None:
        """A call to ``key`` answered: its circuit closes."""
        with self._lock:
            self._circuits.pop(key, None)

    def failure(self, key: str, error: ProviderError, threshold: int, cooldown_s: float) -> bool:
        """A call to ``key`` failed; only unusable failures count. True when this failure
        opened the circuit (or a probe failed and it opened again)."""
        if error.unusable_reason is None or threshold <= 0:
            with self._lock:
                circuit = self._circuits.get(key)
                if circuit is not None:
                    circuit.probing = False
            return False
        with self._lock:
            circuit = self._circuits.setdefault(key, _Circuit())
            circuit.failures += 1
            circuit.kind, circuit.message = error.kind, error.message
            was_probe, circuit.probing = circuit.probing, False
            if circuit.failures >= threshold:
                circuit.open_until = self._clock() + cooldown_s
                return circuit.failures == threshold or was_probe
            return False

    def reset(self) -> None:
        """Close every circuit (tests; a fresh configuration)."""
        with self._lock:
            self._circuits.clear()


#: The process's circuits, shared by every run.
CIRCUITS = CircuitBreakers()
