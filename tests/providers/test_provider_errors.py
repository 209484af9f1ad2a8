"""Which provider errors the engine retries."""

from __future__ import annotations

import pytest

from lev_nb.providers.base import ProviderError


@pytest.mark.parametrize(
    ("kind", "message", "transient"),
    [
        ("rate_limited", "slow down", True),
        ("server", "HTTP 500", True),
        ("transport", "connection reset", True),
        ("auth", "bad key", False),
        ("credits", "top up", False),
        ("invalid_response", "not json", False),
        ("api", "HTTP 529: overloaded_error", True),
        ("api", "HTTP 503: service unavailable", True),
        ("api", "HTTP 400: max_tokens: 500 > 100", False),   # a number in the body is not a status
        ("api", "HTTP 404: model not found", False),
        ("api", "the upstream is overloaded", True),
        ("api", "Too Many Requests", True),
    ],
)
def test_transient_classification(kind: str, message: str, transient: bool) -> None:
    assert ProviderError(kind, message).transient is transient


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown provider error kind"):
        ProviderError("weird", "x")
