"""The notebook views of an evaluation: the results view (summary, inline-SVG charts, failures by
reason, failed cases linked to their run views) and the comparison, styled inline only (an
untrusted notebook strips <style>), and the live view's in-place updates."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from support import BLUEPRINTS

import lev_nb
from lev_nb.eval import contains, equals
from lev_nb.notebook import evalview

SCRIPT = f"scripted:{BLUEPRINTS / 'triage' / 'scripted.json'}"
DATASET = BLUEPRINTS / "triage" / "datasets" / "reports.jsonl"


@pytest.fixture
def two(home: Path) -> tuple[Any, Any]:
    before = lev_nb.evaluate("triage", DATASET, checks=[contains()], model=SCRIPT, processes=1, label="contains")
    after = lev_nb.evaluate("triage", DATASET, checks=[equals()], model=SCRIPT, processes=1, label="equals")
    return before, after


def test_the_results_view_reads_with_inline_styles_and_links_each_failed_run(two: tuple[Any, Any], home: Path) -> None:
    _, failing = two
    page = evalview.results_html(failing)
    assert "<style" not in page and "class=" not in page  # inline styles only
    assert "0.0%</b> passed (0/6), 95% CI 0.0%–39.0%" in page
    assert page.count("<svg") == 2 and "aria-label='pass rate with its 95% interval'" in page
    assert "equals: expected …, got …" in page  # failures grouped by reason
    links = re.findall(r"href='([^']+)'", page)
    assert len(links) == 6 and not any(link.startswith("/") for link in links)  # no path of this machine
    view = Path(links[0]).resolve()  # relative to the kernel's folder
    assert view.is_file() and view.parent == home / "evals" / failing.id / "runs"
    text = view.read_text()
    assert failing.results[0].run_id in text and "read" in text and "R-1,bug" in text  # the run's own view
    bundle = failing._repr_mimebundle_()
    assert bundle["text/html"] == page and "0/6 passed" in bundle["text/plain"]


def test_the_comparison_view_shows_both_rates_and_the_cases_that_changed(two: tuple[Any, Any]) -> None:
    page = evalview.compare_html(two[0].compare(two[1]))
    assert "<style" not in page and "0 fixed, 6 broken" in page
    assert "before: contains" in page and "after: equals" in page and page.count(">broken<") == 6


def test_the_live_view_updates_one_display_and_ends_as_the_results(two: tuple[Any, Any],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[Any] = []

    class Handle:
        def update(self, obj: Any, raw: bool = False) -> None:
            shown.append(obj)

    monkeypatch.setattr("IPython.display.display", lambda obj, display_id=False: shown.append(obj) or Handle())
    from lev_nb.batch import BatchProgress

    view = evalview.EvalProgressView("triage", 6)
    view.update(BatchProgress(total=6, started=3, complete=2))
    view.done(two[0])
    assert "evaluating triage" in shown[0].data and "2/6 finished" in shown[1].data
    assert shown[-1]["text/html"].startswith("<div") and "100.0%</b> passed (6/6)" in shown[-1]["text/html"]
