"""Drive a real JupyterLab in headless chromium (Playwright), offline, for the browser test.

``LabServer`` starts JupyterLab on 127.0.0.1 (a free port, a token, private settings,
workspaces and notebook signatures, no news or update checks) over a folder; ``LabBrowser`` opens notebooks in Debian's
chromium launched through Playwright with ``executable_path`` (Playwright's own browser downloads
are never used) and routes every request: anything that leaves the server's host and port is
refused and recorded, so a test can fail on it.

The helpers talk to JupyterLab through its command registry (``window.jupyterapp``, exposed with
``--LabApp.expose_app_in_browser``) rather than clicks, so they do not depend on menu layout.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser")
CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-default-apps",
    "--disable-domain-reliability", "--disable-client-side-phishing-detection",
]
START_TIMEOUT_S = 90

# JupyterLab settings for a quiet, deterministic session: every cell in the DOM (no windowing),
# no news, no update checks.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false", "checkForUpdates": False,
    },
}


def find_chromium() -> str | None:
    """The path of Debian's chromium, or None when it is not installed."""
    for name in CHROMIUM_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LabServer:
    """A JupyterLab server over ``root`` on 127.0.0.1, stopped by its own process id."""

    def __init__(self, root: Path, state: Path, env: dict[str, str]) -> None:
        self.root = root
        self.state = state
        self.env = env
        self.port = free_port()
        self.token = os.urandom(16).hex()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = state / "jupyterlab.log"

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        settings = self.state / "settings"
        for name, value in LAB_SETTINGS.items():
            path = settings / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(value), encoding="utf-8")
        (self.state / "workspaces").mkdir(parents=True, exist_ok=True)
        (self.state / "runtime").mkdir(parents=True, exist_ok=True)
        (self.state / "notary").mkdir(parents=True, exist_ok=True)
        env = dict(self.env)
        env["JUPYTER_RUNTIME_DIR"] = str(self.state / "runtime")
        env["JUPYTER_CONFIG_DIR"] = str(self.state / "config")
        env["IPYTHONDIR"] = str(self.state / "ipython")
        cmd = [
            sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}", "--ServerApp.password=",
            f"--ServerApp.root_dir={self.root}", "--ServerApp.disable_check_xsrf=False",
            "--LabApp.expose_app_in_browser=True", f"--LabApp.user_settings_dir={settings}",
            f"--LabApp.workspaces_dir={self.state / 'workspaces'}", "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly", "--ServerApp.terminals_enabled=False",
            # A notary of its own: a notebook this session did not run is untrusted, as in a fresh
            # clone, whatever the user's own signatures database says.
            f"--NotebookNotary.data_dir={self.state / 'notary'}",
        ]
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, cwd=self.root, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited at start:\n{self.log()}")
            try:
                with urllib.request.urlopen(f"{self.base}/api/status?token={self.token}", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.3)
        raise RuntimeError(f"JupyterLab did not start in {START_TIMEOUT_S}s:\n{self.log()}")

    def api(self, method: str, path: str) -> Any:
        """Call the server's REST API; the parsed JSON answer (or None)."""
        req = urllib.request.Request(f"{self.base}{path}", method=method)
        req.add_header("Authorization", f"token {self.token}")
        with urllib.request.urlopen(req, timeout=30) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        """Stop every kernel (so no widget model survives for a reopened notebook)."""
        for kernel in self.api("GET", "/api/kernels") or []:
            self.api("DELETE", f"/api/kernels/{kernel['id']}")

    def log(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self.shutdown_kernels()
        except (urllib.error.URLError, OSError):
            pass
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


class LabBrowser:
    """Headless chromium on one JupyterLab, refusing every request that leaves it."""

    def __init__(self, server: LabServer, chromium: str) -> None:
        from playwright.sync_api import sync_playwright

        self.server = server
        self.outside: list[str] = []
        self.console_errors: list[str] = []
        self._pw = sync_playwright().start()
        self.browser = self._pw.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS, headless=True)
        self.context = self.browser.new_context(viewport={"width": 1200, "height": 900}, device_scale_factor=1)
        self.context.route("**/*", self._route)
        self.page = self.new_page()

    def new_page(self) -> Any:
        page = self.context.new_page()
        page.on("websocket", lambda ws: self._check(ws.url))
        page.on("console", lambda msg: self.console_errors.append(msg.text) if msg.type == "error" else None)
        return page

    def _allowed(self, url: str) -> bool:
        parsed = urlparse(url)
        if parsed.scheme in ("data", "blob", "about"):
            return True
        return parsed.hostname == "127.0.0.1" and parsed.port == self.server.port

    def _check(self, url: str) -> None:
        if not self._allowed(url):
            self.outside.append(url)

    def _route(self, route: Any) -> None:
        url = route.request.url
        if self._allowed(url):
            route.continue_()
        else:
            self.outside.append(url)
            route.abort()

    # -- JupyterLab ------------------------------------------------------------------------------
    def open_notebook(self, relpath: str, timeout_s: float = 90) -> None:
        """Open ``relpath`` (relative to the server root) and wait for its kernel to be idle."""
        page = self.page
        page.goto(f"{self.server.base}/lab/tree/{relpath}?token={self.server.token}&reset")
        page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=timeout_s * 1000)
        page.wait_for_selector(".jp-NotebookPanel", timeout=timeout_s * 1000)
        page.wait_for_function(
            """() => {
                const w = window.jupyterapp.shell.currentWidget;
                const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
                return k && k.status === 'idle';
            }""",
            timeout=timeout_s * 1000,
        )

    def command(self, name: str, args: dict[str, Any] | None = None, timeout_s: float = 300) -> Any:
        """Run a JupyterLab command and wait for it to finish."""
        self.page.set_default_timeout(timeout_s * 1000)
        return self.page.evaluate(
            "([name, args]) => window.jupyterapp.commands.execute(name, args).then(r => r === undefined ? null : (typeof r === 'object' ? true : r))",
            [name, args or {}],
        )

    def run_all(self, timeout_s: float = 300) -> None:
        self.command("notebook:run-all-cells", timeout_s=timeout_s)

    def save(self) -> None:
        self.command("docmanager:save")
        self.page.wait_for_function(
            "() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000
        )

    def set_theme(self, theme: str) -> None:
        self.command("apputils:change-theme", {"theme": theme})
        # The theme's name is set once its CSS is in; the splash JupyterLab lays over the page
        # while it changes themes goes a moment later (a screenshot before that shows the splash).
        self.page.wait_for_function(
            "(t) => document.body.dataset.jpThemeName === t && !document.getElementById('jupyterlab-splash')",
            arg=theme, timeout=30_000,
        )

    def notebook_outputs(self) -> list[dict[str, Any]]:
        """Every output of the open notebook, as the frontend model holds it."""
        return list(self.page.evaluate(
            """() => {
                const nb = window.jupyterapp.shell.currentWidget.content;
                const outs = [];
                nb.widgets.forEach((cell, i) => {
                    if (cell.model.type !== 'code') return;
                    const o = cell.model.outputs;
                    for (let j = 0; j < o.length; j++) outs.push({cell: i, ...o.get(j).toJSON()});
                });
                return outs;
            }"""
        ))

    def close(self) -> None:
        try:
            self.context.close()
            self.browser.close()
        finally:
            self._pw.stop()
