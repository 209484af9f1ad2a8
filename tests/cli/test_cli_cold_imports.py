"""What a cold ``lev validate`` and ``lev run --model mock`` load (issue 29): the start-up of each
command is what it imports, so the parts it does not use stay unloaded. The times themselves are
measured by ``python -m bench --only cold``, never asserted here."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRIAGE = str(ROOT / "blueprints" / "triage")

# What `lev validate` has no use for: the run loop, asyncio, the provider classes and their SDKs,
# and the commands it does not run.
NOT_FOR_VALIDATE = (
    "asyncio", "logging", "lev_nb.engine.runner", "lev_nb.engine.state", "lev_nb.engine.pipeline",
    "lev_nb.engine.pipeline.inference", "lev_nb.tools.builtin", "lev_nb.providers.base",
    "lev_nb.providers.anthropic", "lev_nb.providers.openai", "anthropic", "openai",
    "lev_nb.cli.run_commands", "lev_nb.cli.doctor_commands", "lev_nb.cli.eval_commands",
    # What only a sandboxed command needs (lev_nb.sandbox imports them when it runs one).
    "subprocess", "tempfile",
)
# What a mock run has no use for: the model SDKs, the commands it does not run, the notebook views.
NOT_FOR_A_MOCK_RUN = (
    "anthropic", "openai", "httpx", "jsonschema", "lev_nb.providers.anthropic", "lev_nb.providers.openai",
    "lev_nb.cli.doctor_commands", "lev_nb.cli.eval_commands", "lev_nb.cli.mcp_commands",
    "lev_nb.notebook.widget", "lev_nb.notebook.display",
)


def loaded_after(argv: list[str], home: Path, candidates: tuple[str, ...]) -> tuple[int, list[str]]:
    """Run ``lev ARGV`` in a fresh interpreter; its exit status and which of ``candidates`` it loaded."""
    code = ("import contextlib, io, sys\nfrom lev_nb.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    status = main(" + repr(argv) + ")\n"
            "print(status, [m for m in " + repr(candidates) + " if m in sys.modules])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "LEV_HOME": str(home)}, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    status, loaded = out.stdout.strip().splitlines()[-1].split(" ", 1)
    return int(status), ast.literal_eval(loaded)


def test_lev_validate_loads_no_run_loop_no_asyncio_and_no_provider(tmp_path: Path) -> None:
    assert loaded_after(["validate", TRIAGE], tmp_path, NOT_FOR_VALIDATE) == (0, [])


def test_a_mock_run_loads_no_model_sdk_and_no_other_command(tmp_path: Path) -> None:
    argv = ["run", TRIAGE, "--task", "R-1: the app crashes when I save", "--model", "mock", "--quiet"]
    assert loaded_after(argv, tmp_path, NOT_FOR_A_MOCK_RUN) == (0, [])


def test_the_console_script_raises_the_collector_threshold_and_a_caller_s_main_does_not(tmp_path: Path) -> None:
    """The process ``lev`` runs in collects less often while it imports; ``main([...])`` called
    from a test or a notebook leaves the caller's collector as it was."""
    code = ("import contextlib, gc, io, sys\nfrom lev_nb.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['validate', sys.argv[1]])\n    called = gc.get_threshold()\n"
            "    sys.argv = ['lev', 'validate', sys.argv[1]]\n    main()\n"
            "print((called, gc.get_threshold()))\n")
    out = subprocess.run([sys.executable, "-c", code, TRIAGE], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "LEV_HOME": str(tmp_path)}, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    called, own = ast.literal_eval(out.stdout.strip().splitlines()[-1])
    assert called == (700, 10, 10)
    assert own[0] > called[0]
