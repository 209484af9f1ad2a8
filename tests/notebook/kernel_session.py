"""A real python3 kernel that loads this tree, for the tests that drive one as a frontend does."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support import ROOT

OUTPUTS = ("stream", "execute_result", "display_data", "update_display_data", "error")


@contextmanager
def python_kernel(home: Path, cwd: Path | None = None) -> Iterator[Any]:
    """Start a kernel with ``LEV_HOME=home`` (in ``cwd``, by default ``home``); yield its blocking
    client (``client.manager`` interrupts it); shut it down afterwards."""
    jupyter_client = pytest.importorskip("jupyter_client.manager")
    env = dict(os.environ, LEV_HOME=str(home),
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    km, kc = jupyter_client.start_new_kernel(kernel_name="python3", env=env, cwd=str(cwd or home))
    kc.manager = km
    try:
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def execute(kc: Any, code: str, kinds: tuple[str, ...] = OUTPUTS, timeout: float = 120) -> list[dict[str, Any]]:
    """Run ``code``; its iopub messages of ``kinds``, each as ``{"type": kind, **content}``."""
    outputs: list[dict[str, Any]] = []

    def keep(msg: dict[str, Any]) -> None:
        if msg["msg_type"] in kinds:
            outputs.append({"type": msg["msg_type"], **msg["content"]})

    kc.execute_interactive(code, timeout=timeout, output_hook=keep)
    return outputs
