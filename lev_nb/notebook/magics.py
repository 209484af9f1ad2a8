"""``%lev``, ``%%lev`` and ``%%rhai``: lev_nb from notebook cells.

Load with ``%load_ext lev_nb.notebook``. Arguments are parsed by IPython's ``magic_arguments``
(shell-style quoting); a user mistake (bad arguments, a blueprint that does not load, a script that
does not compile) surfaces as one ``UsageError`` line, never a traceback.

- ``%lev validate PATH [--deny-warnings]`` shows the validation report.
- ``%lev graph PATH [--current STAGE] [--direction TB]`` shows the stage graph (Mermaid, and the
  same graph as SVG drawn by Graphviz for front ends that do not draw Mermaid).
- ``%lev ps [--all]`` lists the recorded runs; ``%lev show RUN`` tells one run's story from its
  record (as ``lev show``); ``%lev help`` prints this summary.
- ``%lev config`` shows the effective settings and where each came from (as ``lev config``).
- ``%%lev PATH [VAR] [--model SPEC] [--workdir DIR]``: the cell body is the task. Starts the run,
  shows the live widget, stores the Run in VAR (default ``_lev_run``) and returns at once. The
  widget's forms answer what the run asks (tool approvals, questions, checkpoints).
- ``%%blueprint [VAR] [--dir DIR]``: the cell is an agent.leviath, validated and drawn as it runs
  (see :mod:`lev_nb.notebook.blueprint_magic`).
- ``%%rhai [--validate] [--call FN] [--arg NAME ...] [VAR]``: evaluate the cell as Rhai in the
  hardened engine; ``--validate`` compiles it as an output validator and stores it in VAR
  (default ``validator``); ``--call FN`` calls a function the cell defines.

``%config LevMagics.default_model = "mock"`` sets the model ``%%lev`` uses without ``--model``; when
it is empty, ``[notebook] model`` of the user's configuration (``lev_nb.config()``) applies.
"""

from __future__ import annotations

import re
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.utils.process import arg_split
from traitlets import Unicode

DEFAULT_RUN_VAR = "_lev_run"
DEFAULT_VALIDATOR_VAR = "validator"
CELL_LABEL = "%%rhai cell"

HELP_TEXT = """\
lev_nb magics
  %lev validate PATH [--deny-warnings]      lint a blueprint (agent folder or agent.leviath)
  %lev graph PATH [--current STAGE]         draw the stage graph (Mermaid)
  %lev ps [--all]                           list recorded runs
  %lev show RUN                             a recorded run's story: stages, cost, warnings, answer
  %lev config                               the effective settings and where each came from
  %lev models list [-p PROVIDER] [--remote]  the models each configured provider offers
  %lev models show PROVIDER/MODEL           what one model can do, as a run will use it
  %lev help                                 this text
  %%lev PATH [VAR] [--model SPEC] [--workdir DIR]
                                            run PATH on the task in the cell body; the Run is
                                            stored in VAR (default _lev_run) and shown live
  %%blueprint [VAR] [--dir DIR]             validate and draw the blueprint written in the cell;
                                            bound to VAR (default bp) unless it has errors
  %%rhai [VAR]                              evaluate the cell as Rhai (value also stored in VAR)
  %%rhai --validate [VAR]                   compile the cell as an output validator
                                            (fn validate(content)); stored in VAR (default validator)
  %%rhai --call FN [--arg NAME ...] [VAR]   call FN defined in the cell with Python variables
Set a default model with: %config LevMagics.default_model = "mock"
(or for every notebook: [notebook] model = "mock" in config.toml)
"""


# -- argument parsers of the %lev subcommands (the functions only carry the parsers) -------------
@magic_arguments(name="%lev validate")
@argument("path", help="agent folder or its agent.leviath")
@argument("--deny-warnings", action="store_true", help="warnings make the blueprint invalid")
def _validate_args(line: str) -> None:
    """Lint a blueprint and show the report."""


@magic_arguments(name="%lev graph")
@argument("path", help="agent folder or its agent.leviath")
@argument("--current", default=None, help="highlight this stage")
@argument("--direction", default=None, choices=["LR", "TB", "RL", "BT"], help="flow direction (default: TB, LR for a small graph)")
def _graph_args(line: str) -> None:
    """Show the blueprint's stage graph as a Mermaid diagram."""


@magic_arguments(name="%lev show")
@argument("run_id", help="a run id (or a unique prefix of one)")
def _show_args(line: str) -> None:
    """Tell a recorded run's story (as ``lev show``)."""


@magic_arguments(name="%lev ps")
@argument("--all", action="store_true", help="every recorded run, not only recent ones")
def _ps_args(line: str) -> None:
    """List the runs recorded under $LEV_HOME/runs."""


def parse_arguments(magic: Any, line: str) -> Any:
    """``magic``'s arguments parsed from ``line`` as ``parse_argstring`` does, except that an
    unknown option gets the command line's "did you mean" (``%%lev t --modle mock``)."""
    from lev_nb.blueprint.errors import unrecognized_arguments

    parser = magic.parser
    args, unknown = parser.parse_known_args(arg_split(line, strict=True))
    if unknown:
        options = [o for action in parser._actions for o in action.option_strings]
        name = parser.prog if parser.prog.startswith("%") else f"%%{parser.prog}"  # a cell magic's parser has its bare name
        raise UsageError(f"{name}: {unrecognized_arguments(unknown, options)}")
    return args


def interpolate(text: str, namespace: dict[str, Any]) -> str:
    """Replace ``{name}`` with the value of ``name`` from ``namespace``; anything else stays as written.

    Only bare identifiers that exist in the namespace are replaced, so JSON or code in a task
    keeps its braces.
    """

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        return str(namespace[name]) if name in namespace else match.group(0)

    return re.sub(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", fill, text)


def _one_line(exc: BaseException) -> str:
    """An exception's message folded onto one line."""
    return " ".join(str(exc).split())


def _check_identifier(name: str) -> str:
    if not name.isidentifier():
        raise UsageError(f"'{name}' is not a valid Python variable name")
    return name


@magics_class
class LevMagics(Magics):
    """The lev_nb magics: ``%lev`` (line), ``%%lev`` (cell) and ``%%rhai`` (cell)."""

    default_model = Unicode(
        "",
        help="Model %%lev uses when no --model is given: 'mock', 'scripted:FILE' or 'provider/model'. "
        "Empty means each stage uses its own model block.",
    ).tag(config=True)

    @property
    def _user_ns(self) -> dict[str, Any]:
        """The notebook's variables. ``Magics.shell`` is Optional, but registered magics always have one."""
        if self.shell is None:
            raise UsageError("lev_nb magics need an IPython shell; load them with %load_ext lev_nb.notebook")
        return self.shell.user_ns

    # -- %lev and %%lev ----------------------------------------------------------------------
    @line_magic("lev")  # type: ignore[arg-type]  # IPython types line_magic(name) as `_F | Callable[[_F], _F]`
    def lev_line(self, line: str) -> Any:
        """``%lev validate|graph|ps|show|config|help ...`` (see ``%lev help``)."""
        command, _, rest = line.strip().partition(" ")
        if command in ("", "help", "-h", "--help"):
            print(HELP_TEXT, end="")
            return None
        handlers = {"validate": self._validate, "graph": self._graph, "ps": self._ps, "show": self._show,
                    "config": self._config, "models": self._models}
        handler = handlers.get(command)
        if handler is None:
            from lev_nb.cli.app import guess_command

            names = [*handlers, "help"]
            hint = guess_command(command, names)
            raise UsageError(f"%lev: unknown command '{command}'" + (f" ({hint})" if hint else "")
                             + f"; use one of {', '.join(names)}")
        return handler(rest)

    def _validate(self, rest: str) -> Any:
        import lev_nb
        from lev_nb.blueprint import BlueprintError

        args = parse_arguments(_validate_args, rest)
        try:
            return lev_nb.validate(args.path, deny_warnings=args.deny_warnings)
        except BlueprintError as exc:
            raise UsageError(_one_line(exc)) from None

    def _graph(self, rest: str) -> Any:
        args = parse_arguments(_graph_args, rest)
        bp = self._load(args.path)
        if args.current is not None and args.current not in bp.stage_names:
            raise UsageError(
                f"%lev graph: no stage '{args.current}' in {args.path}; stages: {', '.join(bp.stage_names)}"
            )
        from lev_nb.blueprint.graph import Diagram
        from lev_nb.blueprint.picture import svg_or_none

        return Diagram(bp.mermaid(direction=args.direction, current=args.current),
                       picture=lambda: svg_or_none(bp, direction=args.direction, current=args.current))

    def _ps(self, rest: str) -> None:
        from lev_nb.cli.run_status import print_ps

        args = parse_arguments(_ps_args, rest)
        print_ps(all_runs=args.all)

    def _show(self, rest: str) -> Any:
        from lev_nb.cli.run_status import status_text
        from lev_nb.explain.record import RecordUnreadable, open_run
        from lev_nb.explain.show import story_of
        from lev_nb.notebook.display import RecordedRun

        args = parse_arguments(_show_args, rest)
        try:
            record = open_run(args.run_id)
        except RecordUnreadable as exc:
            raise UsageError(f"%lev show: {_one_line(exc)}") from None
        return RecordedRun(story_of(record), status_text(record.meta))

    def _config(self, rest: str) -> None:
        import argparse

        from lev_nb.cli.config_commands import run_config

        if rest.strip():
            raise UsageError("%lev config takes no arguments; use lev_nb.config() for the settings object")
        if run_config(argparse.Namespace(action="show", json=False, path=False)) != 0:
            raise UsageError("%lev config: the configuration cannot be read (see the message above)")

    def _models(self, rest: str) -> None:
        """``%lev models list|show ...``: the same as ``lev models``."""
        import shlex

        from lev_nb.cli import main

        try:
            code = main(["models", *shlex.split(rest)])
        except SystemExit as exc:  # argparse: a usage error or --help
            code = exc.code if isinstance(exc.code, int) else 0
        if code not in (0, None):
            raise UsageError("%lev models failed (see the message above)")

    @staticmethod
    def _default_model() -> str | None:
        """``[notebook] model`` of the user's configuration."""
        from lev_nb.settings import ConfigError, current

        try:
            return current().notebook.model
        except ConfigError as exc:
            raise UsageError(f"%%lev: {_one_line(exc)}") from None

    @staticmethod
    def _load(path: str) -> Any:
        import lev_nb
        from lev_nb.blueprint import BlueprintError

        try:
            return lev_nb.load(path)
        except BlueprintError as exc:
            raise UsageError(_one_line(exc)) from None

    @magic_arguments()
    @argument("path", help="agent folder or its agent.leviath")
    @argument("var", nargs="?", default=DEFAULT_RUN_VAR, help="variable that receives the Run")
    @argument("--model", "-m", default=None, help="mock, scripted:FILE or provider/model (all stages)")
    @argument("--workdir", default=None, help="working directory of the run")
    @argument("--no-widget", action="store_true", help="store the Run without showing the widget")
    @cell_magic("lev")  # type: ignore[arg-type]  # IPython types cell_magic(name) as `_F | Callable[[_F], _F]`
    def lev(self, line: str, cell: str) -> None:
        """Run a blueprint on the task written in the cell body; returns at once (the run is live).

        ``{name}`` in the body is replaced by the value of a variable of the notebook.
        """
        from lev_nb.notebook.widget import watch
        from lev_nb.scripting import ScriptError

        args = parse_arguments(self.lev, line)
        var = _check_identifier(args.var)
        bp = self._load(args.path)
        model = args.model if args.model is not None else (self.default_model or self._default_model())
        task = interpolate(cell.strip(), self._user_ns)
        try:
            # The view's forms answer the run's requests, so a run shown live asks from its start.
            run = bp.run(task, model=model, workdir=args.workdir, interactive=True if not args.no_widget else None)
        except (ValueError, TypeError, ScriptError) as exc:
            raise UsageError(f"%%lev: {_one_line(exc)}") from None
        self._user_ns[var] = run
        if not args.no_widget:
            watch(run, stages=bp.stage_names)

    # -- %%rhai ------------------------------------------------------------------------------
    @magic_arguments()
    @argument("var", nargs="?", default=None, help="variable that receives the result")
    @argument("--validate", action="store_true", help="compile the cell as an output validator")
    @argument("--call", default=None, metavar="FN", help="call this function of the cell")
    @argument("--arg", action="append", default=[], metavar="NAME", help="notebook variable passed to FN (repeat)")
    @cell_magic("rhai")  # type: ignore[arg-type]  # IPython types cell_magic(name) as `_F | Callable[[_F], _F]`
    def rhai(self, line: str, cell: str) -> Any:
        """Evaluate the cell as Rhai in lev_nb's hardened engine and return its value."""
        args = parse_arguments(self.rhai, line)
        if args.validate:
            if args.call or args.arg:
                raise UsageError("%%rhai: --validate cannot be combined with --call/--arg")
            return self._compile_validator(cell, _check_identifier(args.var or DEFAULT_VALIDATOR_VAR))
        value = self._evaluate(cell, args.call, args.arg)
        if args.var is not None:
            self._user_ns[_check_identifier(args.var)] = value
        return value

    def _compile_validator(self, cell: str, var: str) -> None:
        from lev_nb.scripting import ScriptError, compile_validator

        try:
            validator = compile_validator(source=cell, label=CELL_LABEL)
        except ScriptError as exc:
            raise UsageError(_one_line(exc)) from None
        self._user_ns[var] = validator
        print(f"validator compiled; try {var}.check(\"...\")")

    def _evaluate(self, cell: str, fn: str | None, arg_names: list[str]) -> Any:
        from lev_nb.rhai import Engine, NotPlainDataError, RhaiError

        missing = [n for n in arg_names if n not in self._user_ns]
        if missing:
            raise UsageError(f"%%rhai: no notebook variable named {', '.join(repr(n) for n in missing)}")
        if arg_names and fn is None:
            raise UsageError("%%rhai: --arg needs --call FN")
        engine = Engine(on_print=print, on_debug=print)
        try:
            if fn is None:
                return engine.eval(cell)
            ast = engine.compile(cell)
            return engine.call(ast, fn, *(self._user_ns[n] for n in arg_names))
        except RhaiError as exc:
            raise UsageError(f"Rhai: {_one_line(exc)}") from None
        except (NotPlainDataError, TypeError) as exc:
            raise UsageError(f"Rhai: {_one_line(exc)}") from None


def load_ipython_extension(ipython: Any) -> None:
    """Register the lev_nb magics (``%load_ext lev_nb.notebook``)."""
    from lev_nb.notebook.blueprint_magic import BlueprintMagics

    ipython.register_magics(LevMagics)
    ipython.register_magics(BlueprintMagics)
