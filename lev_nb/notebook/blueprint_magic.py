"""``%%blueprint [NAME] [--dir DIR]``: a blueprint written in a cell, judged and drawn as it runs.

The cell is an agent.leviath. Running it shows what ``lev validate`` finds, each finding with the
line of the cell it points at (a TOML mistake: its line and column under the offending line),
draws the stage graph, and binds the :class:`~lev_nb.blueprint.Blueprint` to ``NAME`` (default
``bp``) for the next cells, also when there are only warnings. With errors nothing is bound, and
an earlier blueprint in ``NAME`` is removed, so a later cell cannot run a stale design; the output
says so. A cell has no folder: relative script paths (``tools/*.rhai``, validators, hooks) resolve
against the notebook's working directory, or ``--dir DIR``.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from lev_nb.notebook.design_check import Verdict, check_text, diagram_of

DEFAULT_VAR = "bp"


class CellVerdict:
    """What a ``%%blueprint`` cell shows first: the findings with their lines, and what was bound."""

    def __init__(self, verdict: Verdict, binding: str) -> None:
        self.verdict = verdict
        self.binding = binding

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        note = f"<div style='margin-top:4px'>{html.escape(self.binding)}</div>"
        return {"text/html": f"<div class='lev-blueprint-cell'>{self.verdict.findings_html()}{note}</div>",
                "text/plain": repr(self)}

    def __repr__(self) -> str:
        return f"{self.verdict.plain()}\n{self.binding}"


@magics_class
class BlueprintMagics(Magics):
    """The ``%%blueprint`` cell magic."""

    @magic_arguments()
    @argument("var", nargs="?", default=DEFAULT_VAR, help="variable that receives the Blueprint (default bp)")
    @argument("--dir", default=None, help="folder the blueprint's relative script paths resolve against")
    @cell_magic("blueprint")  # type: ignore[arg-type]  # IPython types cell_magic(name) as `_F | Callable[[_F], _F]`
    def blueprint(self, line: str, cell: str) -> None:
        """Validate and draw the blueprint written in the cell; bind it to VAR unless it has errors."""
        from IPython.display import display

        from lev_nb.notebook.magics import parse_arguments

        args = parse_arguments(self.blueprint, line)
        var = args.var
        if not var.isidentifier():
            raise UsageError(f"%%blueprint: '{var}' is not a valid Python variable name")
        if args.dir is not None and not Path(args.dir).is_dir():
            raise UsageError(f"%%blueprint: --dir {args.dir} is not a folder")
        if self.shell is None:
            raise UsageError("%%blueprint needs an IPython shell; load it with %load_ext lev_nb.notebook")
        namespace = self.shell.user_ns
        verdict = check_text(cell, args.dir)
        if verdict.usable:
            namespace[var] = verdict.blueprint
            binding = f"→ bound to `{var}`" + (" (mind the warnings)" if verdict.report.warnings else "")
        else:
            binding = f"`{var}` is not bound: fix the {'problem' if verdict.refusal else 'errors'} above"
            if isinstance(namespace.get(var), _blueprint_type()):
                del namespace[var]
                binding += " (its earlier blueprint was removed, so no later cell runs a stale design)"
        display(CellVerdict(verdict, binding))
        if verdict.blueprint is not None:
            display(diagram_of(verdict.blueprint))


def _blueprint_type() -> type:
    from lev_nb.blueprint import Blueprint

    return Blueprint
