"""The notebook views of an evaluation (issue 22): a live progress line while the runs go, then
the results view, which stays in the saved notebook as a static snapshot.

- :class:`EvalProgressView`: one display, updated in place as ``run_many`` reports progress (a
  bar and the batch's counts), replaced by the results view when the evaluation ends;
- :func:`results_html`: the summary (pass rate with its interval, cost, durations), two small
  charts drawn here as inline SVG (pass rate with its 95% interval; cost per case), the failures
  grouped by reason, the stage paths, and the failed cases with their reasons and a link to each
  run's view (a static snapshot of the run view written beside the evaluation's record, linked
  relative to the notebook's folder so JupyterLab opens it in a tab);
- :func:`compare_html`: two evaluations side by side and the cases that changed.

Everything is styled inline (no ``<style>`` block, which an untrusted notebook strips), with
colours that read on light and dark backgrounds, and nothing is fetched from anywhere.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from lev_nb.eval.evaluation import model_label
from lev_nb.explain.fold import FinalOutput

__all__ = ["EvalProgressView", "compare_bundle", "eval_bundle", "compare_html", "results_html", "write_run_view"]

FAILED_ROWS = 25  # failed cases listed (the rest are counted)
RUN_VIEWS = 25  # failed runs whose view is written beside the record
GREEN, RED, AMBER, GREY, BLUE = "#2e7d32", "#c62828", "#a34f00", "#757575", "#1565c0"
BOX = "font-family:system-ui,sans-serif;font-size:13px;line-height:1.45;text-align:left;max-width:60em"
CELL = "padding:2px 8px;border-bottom:1px solid rgba(127,127,127,.3);vertical-align:top;text-align:left"
HEAD = CELL + ";font-weight:600"
MUTED = "opacity:.75"


def _e(value: Any) -> str:
    return html.escape(str(value))


def _pct(value: float) -> str:
    return f"{value:.1%}"


def _money(value: float) -> str:
    # The dollar sign in an element of its own: JupyterLab typesets $...$ in HTML outputs as
    # LaTeX, and MathJax never pairs delimiters across elements.
    return f"<span>$</span>{value:.4f}"


def _clip(text: Any, n: int) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def progress_html(title: str, progress: Any) -> str:
    """A bar of finished runs and the batch's counts line."""
    done = progress.finished / progress.total if progress.total else 1.0
    colour = RED if progress.failed else BLUE
    bar = (f"<div style='background:rgba(127,127,127,.25);height:8px;border-radius:4px;width:24em'>"
           f"<div style='background:{colour};height:8px;border-radius:4px;width:{done * 100:.1f}%'></div></div>")
    return (f"<div style='{BOX}' data-lev-eval='running'><b>evaluating {_e(title)}</b> {bar}"
            f"<div style='{MUTED}'>{_e(progress.line())}</div></div>")


class EvalProgressView:
    """The live view of one evaluation: displayed when created, updated in place, and replaced by
    the results view at the end (so the saved notebook keeps the results, not a progress bar)."""

    def __init__(self, title: str, total: int) -> None:
        from IPython.display import HTML, display

        from lev_nb.batch import BatchProgress

        self.title = title
        self._html = HTML
        self.handle = display(HTML(progress_html(title, BatchProgress(total=total))), display_id=True)

    def update(self, progress: Any) -> None:
        """Show the batch's progress (called as ``run_many`` reports it)."""
        if self.handle is not None:
            self.handle.update(self._html(progress_html(self.title, progress)))

    def done(self, evaluation: Any) -> None:
        """Replace the progress by the evaluation's results view."""
        if self.handle is not None:
            self.handle.update(evaluation_display(evaluation), raw=True)


def evaluation_display(evaluation: Any) -> dict[str, str]:
    """The results view as a MIME bundle (HTML and text)."""
    return {"text/html": results_html(evaluation), "text/plain": repr(evaluation) + "\n" + str(evaluation.summary())}


def eval_bundle(evaluation: Any) -> dict[str, str]:
    """What an Evaluation shows as in a notebook (its ``_repr_mimebundle_`` adds this)."""
    return {"text/html": results_html(evaluation)}


def compare_bundle(comparison: Any) -> dict[str, str]:
    """What a Comparison shows as in a notebook."""
    return {"text/html": compare_html(comparison)}


# -- charts (inline SVG, drawn here) -------------------------------------------------------------
def rate_chart(rows: list[tuple[str, float, float, float]], width: int = 320) -> str:
    """Horizontal bars of pass rates with their 95% interval as a whisker: rows of
    (label, rate, low, high)."""
    label_w, row_h = 110, 22
    bar_w = width - label_w - 52  # room for "100.0%" after the bar
    height = row_h * len(rows) + 6
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' role='img' "
             f"aria-label='pass rate with its 95% interval' style='font:11px system-ui,sans-serif'>"]
    for i, (label, rate, low, high) in enumerate(rows):
        y = 4 + i * row_h
        colour = GREEN if rate >= 0.9 else AMBER if rate >= 0.5 else RED
        parts.append(f"<text x='0' y='{y + 13}' fill='currentColor'>{_e(_clip(label, 18))}</text>")
        parts.append(f"<rect x='{label_w}' y='{y + 3}' width='{bar_w}' height='12' fill='{GREY}' fill-opacity='.25'/>")
        parts.append(f"<rect x='{label_w}' y='{y + 3}' width='{bar_w * rate:.1f}' height='12' fill='{colour}'/>")
        x1, x2 = label_w + bar_w * low, label_w + bar_w * high
        parts.append(f"<line x1='{x1:.1f}' x2='{x2:.1f}' y1='{y + 9}' y2='{y + 9}' stroke='currentColor'/>")
        for x in (x1, x2):
            parts.append(f"<line x1='{x:.1f}' x2='{x:.1f}' y1='{y + 5}' y2='{y + 13}' stroke='currentColor'/>")
        parts.append(f"<text x='{label_w + bar_w + 4}' y='{y + 13}' fill='currentColor'>{_pct(rate)}</text>")
    parts.append("</svg>")
    return "".join(parts)


def cost_chart(results: list[Any], width: int = 320, height: int = 60) -> str:
    """One thin bar per run, its cost (or its tokens when nothing was priced), failed runs in red."""
    values = [r.cost_usd for r in results]
    unit = "cost"
    if not any(values):
        values, unit = [float(r.tokens) for r in results], "tokens"
    top = max(values) if values and max(values) > 0 else 1.0
    n = max(1, len(values))
    step = width / n
    bars = [f"<rect x='{i * step:.2f}' y='{height - 14 - (height - 16) * v / top:.1f}' width='{max(step - 0.5, 0.5):.2f}' "
            f"height='{(height - 16) * v / top:.1f}' fill='{GREEN if r.passed else RED}'/>"
            for i, (v, r) in enumerate(zip(values, results))]
    top_text = f"{top:.4f} USD" if unit == "cost" else f"{top:.0f} tokens"
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' role='img' "
            f"aria-label='{unit} per case' style='font:11px system-ui,sans-serif'>{''.join(bars)}"
            f"<text x='0' y='{height - 2}' fill='currentColor'>{unit} per case (max {_e(top_text)}; red: failed)</text></svg>")


# -- the results view ----------------------------------------------------------------------------
def _table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th style='{HEAD}'>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td style='{CELL}'>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table style='border-collapse:collapse;margin:4px 0'><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _chip(passed: bool) -> str:
    colour, text = (GREEN, "pass") if passed else (RED, "FAIL")
    return f"<span style='background:{colour};color:#fff;border-radius:3px;padding:0 5px;font-size:11px'>{text}</span>"


def run_views_dir(evaluation: Any) -> Path:
    """Where the failed runs' static views of ``evaluation`` are written."""
    from lev_nb.eval.record import evals_dir

    return evals_dir() / evaluation.id / "runs"


def write_run_view(run_id: str, folder: Path, blueprint_path: str | None = None) -> Path | None:
    """Write ``run_id``'s run view, as a static page built from its recorded events, into
    ``folder``; None when the run's record cannot be read."""
    from lev_nb.engine.events import event_from_dict
    from lev_nb.notebook import runview
    from lev_nb.store.files import RunStore, write_atomic

    try:
        store = RunStore(run_id)
        events = store.read_events()
        meta = store.read_meta()
        output = store.read_final_output()
    except (OSError, ValueError):
        return None
    stages: list[str] = []
    if blueprint_path:
        try:
            from lev_nb.blueprint import load

            stages = load(Path(blueprint_path)).stage_names
        except Exception:  # the blueprint changed or moved since: the view shows the stages it saw
            stages = []
    state = runview.RunState(run_id, stages)
    for data in events:
        try:
            state.apply(event_from_dict(data))
        except (KeyError, TypeError, ValueError):
            continue
    final = meta.get("final_output") or {}
    if output is not None:
        state.set_output(FinalOutput(output.decode("utf-8", "replace"), final.get("format"),
                                             final.get("stage") or "", bool(final.get("truncated"))))
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(run_id)}</title></head>"
            f"<body>{runview.snapshot_html(state)}</body></html>")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{run_id}.html"
    write_atomic(path, page.encode(), durable=False)
    return path


def results_html(evaluation: Any) -> str:
    """The results view of ``evaluation`` (see the module docstring)."""
    s = evaluation.summary()
    facts = (f"{_e(evaluation.agent)} · model {_e(model_label(evaluation.model))} · dataset {_e(Path(evaluation.dataset).name)}"
             f" · {_e(evaluation.id)}")
    numbers = (f"<div><b style='font-size:1.2em'>{_pct(s.pass_rate)}</b> passed ({s.passed}/{s.cases}), 95% CI "
               f"{_pct(s.ci_low)}–{_pct(s.ci_high)} · cost {_money(s.cost_usd)} ({_money(s.cost_per_case)} per case"
               f"{f', judge {_money(s.judge_cost_usd)} apart' if s.judge_cost_usd else ''}) · "
               f"{s.tokens_per_case:.0f} tokens per case · p50 {_secs(s.p50_s)}, p95 {_secs(s.p95_s)}</div>")
    charts = (f"<div style='display:flex;flex-wrap:wrap;gap:16px;margin:6px 0'>"
              f"{rate_chart([(evaluation.name, s.pass_rate, s.ci_low, s.ci_high)])}{cost_chart(evaluation.results)}</div>")
    parts = [f"<div style='{BOX}' data-lev-eval='{_e(evaluation.id)}'>",
             f"<div><b>evaluation: {_e(evaluation.name)}</b></div><div style='{MUTED}'>{facts}</div>", numbers, charts]
    if s.failures:
        parts.append("<div style='margin-top:6px'><b>failures by reason</b></div>")
        parts.append(_table(["runs", "reason"], [[str(n), _e(reason)] for reason, n in s.failures]))
    if s.stage_paths:
        parts.append("<div style='margin-top:6px'><b>stage paths</b></div>")
        parts.append(_table(["runs", "path"], [[str(n), _e(path)] for path, n in s.stage_paths[:10]]))
    failed = evaluation.failures
    if failed:
        parts.append(f"<div style='margin-top:6px'><b>failed cases</b> ({len(failed)})</div>")
        parts.append(_table(["case", "task", "reason", "run"], [_failed_row(evaluation, r, i < RUN_VIEWS)
                                                                for i, r in enumerate(failed[:FAILED_ROWS])]))
        if len(failed) > FAILED_ROWS:
            parts.append(f"<div style='{MUTED}'>… and {len(failed) - FAILED_ROWS} more: "
                         f"<code>evaluation.to_pandas().query('not passed')</code></div>")
    parts.append("</div>")
    return "".join(parts)


def _failed_row(evaluation: Any, result: Any, with_view: bool) -> list[str]:
    case = f"{result.index + 1}" + (f".{result.repeat + 1}" if evaluation.repeats > 1 else "")
    run = _e(result.run_id or "-")
    if result.run_id and with_view:
        path = run_views_dir(evaluation) / f"{result.run_id}.html"
        if not path.is_file():
            written = write_run_view(result.run_id, run_views_dir(evaluation), evaluation.blueprint_path)
            path = written if written is not None else path
        if path.is_file():
            run = (f"<a href='{_e(_link(path))}' target='_blank' title='the run view of {run}'>"
                   f"{_e(_clip(result.run_id, 40))}</a>")
    return [case, _e(_clip(result.task, 60)), _e(_clip(result.reason, 160)), run]


def _link(path: Path) -> str:
    """The link to a written run view, relative to the kernel's folder (the notebook's): JupyterLab
    opens a relative link to a file it serves in a tab of its own, and a saved notebook keeps no
    path of this machine."""
    import os

    return Path(os.path.relpath(path.resolve(), Path.cwd().resolve())).as_posix()


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def compare_html(comparison: Any) -> str:
    """Two evaluations side by side: their pass rates (a chart), numbers, and each changed case."""
    b, a = comparison.before, comparison.after
    sb, sa = b.summary(), a.summary()
    chart = rate_chart([(f"before: {b.name}", sb.pass_rate, sb.ci_low, sb.ci_high),
                        (f"after: {a.name}", sa.pass_rate, sa.ci_low, sa.ci_high)], width=420)
    numbers = _table(["", "before", "after"], [
        ["evaluation", _e(b.name), _e(a.name)],
        ["pass rate", _pct(sb.pass_rate), _pct(sa.pass_rate)],
        ["cost per case", _money(sb.cost_per_case), _money(sa.cost_per_case)],
        ["tokens per case", f"{sb.tokens_per_case:.0f}", f"{sa.tokens_per_case:.0f}"],
        ["p50 / p95", f"{_secs(sb.p50_s)} / {_secs(sb.p95_s)}", f"{_secs(sa.p50_s)} / {_secs(sa.p95_s)}"],
    ])
    colours = {"fixed": GREEN, "broken": RED, "added": BLUE, "removed": GREY}
    rows = []
    for change in comparison.cases:
        what = change.what_changed()
        if change.change in ("still passing", "still failing") and not what:
            continue
        colour = colours.get(change.change, GREY)
        rows.append([f"<span style='color:{colour};font-weight:600'>{_e(change.change)}</span>",
                     _e(_clip(change.task, 60)), _e(_clip("; ".join(what), 160))])
    counts = f"{len(comparison.fixed)} fixed, {len(comparison.broken)} broken"
    body = _table(["change", "task", "what changed"], rows) if rows else f"<div style='{MUTED}'>no case changed</div>"
    return (f"<div style='{BOX}' data-lev-eval-compare='{_e(b.id)}..{_e(a.id)}'><div><b>comparison</b> · {counts}</div>"
            f"{chart}{numbers}{body}</div>")
