"""The one elapsed-time formatter (lev_nb.text.format_elapsed), exact and rough, and where it shows."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lev_nb.batch.many import BatchProgress
from lev_nb.explain import story
from lev_nb.text import format_elapsed, squeezed


@pytest.mark.parametrize(("seconds", "shown"), [
    (12.34, "12.3 s"), (245, "4 min 05 s"), (3720, "1 h 02 min"),
])
def test_exact_elapsed(seconds: float, shown: str) -> None:
    assert format_elapsed(seconds) == shown


@pytest.mark.parametrize(("seconds", "shown"), [
    (45, "45 s"), (89.4, "89 s"), (180, "3 min"), (5399, "90 min"), (5400, "1.5 h"),
])
def test_rough_elapsed(seconds: float, shown: str) -> None:
    assert format_elapsed(seconds, rough=True) == shown


def test_run_views_and_batch_eta_share_it() -> None:
    assert story.format_elapsed is format_elapsed
    # 10 of 40 done in 60 s: 30 left at 1/6 per s is 180 s, told roughly.
    progress = BatchProgress(total=40, complete=10, elapsed_s=60.0)
    assert progress.pace() == "25% · 0.17 tasks/s · about 3 min left"


@given(st.text(alphabet=st.sampled_from(list("ab é\t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u2028\u3000x")), max_size=3000),
       st.integers(min_value=0, max_value=300))
def test_squeezed_is_the_joined_split_cut(text: str, limit: int) -> None:
    """squeezed keeps a long text's start without splitting all of it: the same characters as
    joining its split and cutting, for every kind of whitespace str.split knows."""
    assert squeezed(text, limit) == " ".join(text.split())[:limit]
