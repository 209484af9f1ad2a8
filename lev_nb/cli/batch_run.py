"""``lev run --count N --workers K``: N copies of a run sent through :func:`lev_nb.batch.run_many`
across K local worker processes (issue 15). Prints one run id a line (or, with ``--json``, the
summaries), a progress line on stderr, and exits 0 only when every run completed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


class _BatchProgress:
    """The batch's counts on one stderr line: redrawn on a terminal, written once at the end elsewhere."""

    def __init__(self) -> None:
        from lev_nb.cli.progress import ProgressLine

        self.line = ProgressLine(sys.stderr)

    def __call__(self, progress: Any) -> None:
        self.line.show(progress.line(), permanent=progress.done)


def run_batch(bp: Any, task: str, schema: dict[str, Any] | None, inputs: dict[str, Any],
              args: argparse.Namespace) -> int:
    """Run ``args.count`` copies of the task across ``args.workers`` processes; the exit status."""
    from lev_nb.batch import run_many

    if args.workers < 1 or args.count < 1:
        print("lev run: --count and --workers take a number of at least 1", file=sys.stderr)
        return 2
    options: dict[str, Any] = dict(inputs)
    for name in ("workdir", "output_format", "output_instructions", "webhook"):
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    if schema is not None:
        options["output_schema"] = schema
    # Launch permissions go along; nobody can answer at a worker process, so an ask is denied.
    options.update(allow=list(args.allow), yolo=args.yolo, max_depth=args.max_depth, interactive=False)
    summaries = run_many(bp, [task] * args.count, args.model, processes=args.workers,
                         on_progress=None if args.quiet else _BatchProgress(), show=False, **options)
    if args.json:
        print(json.dumps([s.run_id for s in summaries]))  # as lev run --count --json prints them
    else:
        for summary in summaries:
            print(summary.run_id or "-")
    if not args.quiet:
        for s in summaries:  # the workers' warnings, told here since nobody saw them happen
            for line in s.warnings:
                print(f"lev run {s.run_id}: warning {line}", file=sys.stderr)
    bad = [s for s in summaries if not s.ok]
    for s in bad:
        print(f"lev run: copy {s.index + 1} ended {s.status}: {s.error}", file=sys.stderr)
    return 1 if bad else 0
