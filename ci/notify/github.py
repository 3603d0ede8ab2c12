"""GitHub's REST API through the GitHub CLI (``gh api``): no HTTP written here.

``gh`` takes its token from ``GH_TOKEN`` (the workflow step's ``github.token``) and its
host from ``GH_HOST`` (default github.com; another host is spoken to as GitHub
Enterprise, ``https://HOST/api/v3/``, with ``GH_ENTERPRISE_TOKEN``: that is how the tests
point it at a local server). Request bodies go through stdin (``--input -``), never the
command line; ``--paginate`` follows the ``Link`` headers and prints one JSON array per
page, which :func:`pages` joins.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any, Mapping

GH_TIMEOUT_S = 120


class GitHubError(RuntimeError):
    """A ``gh api`` call that failed; the message has the method, the path and what gh said."""


def pages(text: str) -> list[Any]:
    """The items of ``gh api --paginate`` output: JSON arrays one after another (or one object per page)."""
    decoder, items, at = json.JSONDecoder(), [], 0
    text = text.strip()
    while at < len(text):
        value, end = decoder.raw_decode(text, at)
        items.extend(value if isinstance(value, list) else [value])
        at = end
        while at < len(text) and text[at].isspace():
            at += 1
    return items


@dataclass
class GitHub:
    """``gh api`` calls for one repository, with the environment ``gh`` runs in."""

    repo: str  # OWNER/NAME
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    gh: str = "gh"
    calls: list[str] = field(default_factory=list)  # "METHOD path", in order: what the run did, for its log

    def _run(self, method: str, path: str, body: Any = None, paginate: bool = False) -> str:
        exe = shutil.which(self.gh, path=self.env.get("PATH")) or shutil.which(self.gh)
        if exe is None:
            raise GitHubError(f"the GitHub CLI ({self.gh}) is not installed")
        cmd = [exe, "api", "--method", method, path, "-H", "Accept: application/vnd.github+json"]
        if paginate:
            cmd.append("--paginate")
        if body is not None:
            cmd += ["--input", "-"]
        self.calls.append(f"{method} {path}")
        try:
            done = subprocess.run(cmd, input=None if body is None else json.dumps(body), capture_output=True, text=True,
                                  env=dict(self.env), timeout=GH_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise GitHubError(f"{method} {path}: gh did not answer in {GH_TIMEOUT_S} s") from None
        if done.returncode != 0:
            said = (done.stderr.strip() or done.stdout.strip())[-500:]
            raise GitHubError(f"{method} {path}: gh exited {done.returncode}: {said}")
        return done.stdout

    def get(self, path: str) -> Any:
        text = self._run("GET", path)
        return json.loads(text) if text.strip() else None

    def get_all(self, path: str) -> list[Any]:
        """Every item of a list endpoint, all pages (``per_page=100`` unless the path sets it)."""
        sep = "&" if "?" in path else "?"
        return pages(self._run("GET", path if "per_page=" in path else f"{path}{sep}per_page=100", paginate=True))

    def post(self, path: str, body: Mapping[str, Any]) -> Any:
        return json.loads(self._run("POST", path, body) or "null")

    def patch(self, path: str, body: Mapping[str, Any]) -> Any:
        return json.loads(self._run("PATCH", path, body) or "null")

    def repo_path(self, rest: str) -> str:
        return f"repos/{self.repo}/{rest}"
