"""Headless Chromium (Debian's ``chromium``) over a folder served on 127.0.0.1: the tests that read pages as people do.

A test's probe page (its own HTML and script, served beside the site at a path of its own) loads a site page in a
same-origin iframe and writes what it found as JSON into ``<pre id="result">``; Chromium's ``--dump-dom`` returns it.
"""

from __future__ import annotations

import functools
import html
import http.server
import json
import re
import shutil
import subprocess
import threading
from collections.abc import Mapping
from pathlib import Path

CHROMIUM = shutil.which("chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


class _Handler(http.server.SimpleHTTPRequestHandler):
    """The folder's files, and the probe pages by path (query and fragment aside); nothing logged."""

    probes: Mapping[str, bytes] = {}

    def do_GET(self):
        probe = self.probes.get(self.path.split("#")[0].split("?")[0])
        if probe is not None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(probe)))
            self.end_headers()
            self.wfile.write(probe)
            return
        super().do_GET()

    def log_message(self, *args):
        pass

    def handle(self):
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):  # the browser closing early is not an error here
            pass


def served_dom(
    root: Path,
    path: str,
    profile: Path,
    *,
    probes: Mapping[str, bytes] | None = None,
    budget_ms: int,
    window: tuple[int, int] | None = None,
    timeout_s: float = 120,
) -> subprocess.CompletedProcess:
    """Chromium's ``--dump-dom`` of ``path`` (with its query or fragment) while ``root`` and ``probes`` are served."""
    handler = type("Handler", (_Handler,), {"probes": dict(probes or {})})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    size = [f"--window-size={window[0]},{window[1]}"] if window else []
    try:
        return subprocess.run(
            [
                CHROMIUM,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                f"--virtual-time-budget={budget_ms}",
                *size,
                "--dump-dom",
                f"http://127.0.0.1:{server.server_address[1]}/{path}",
            ],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    finally:
        server.shutdown()
        server.server_close()


def probe_result(proc: subprocess.CompletedProcess) -> dict:
    """The JSON a probe page wrote into ``<pre id="result">``: present, no longer "pending", without an "error"."""
    match = re.search(r'<pre id="result">([^<]*)</pre>', proc.stdout)
    assert match and match.group(1) != "pending", f"no probe result (exit {proc.returncode}): {proc.stderr[-2000:]}"
    result = json.loads(html.unescape(match.group(1)))
    assert "error" not in result, result
    return result
