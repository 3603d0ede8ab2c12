"""GitHub's REST API through the GitHub CLI (``gh api``, token from ``GH_TOKEN``, host from ``GH_HOST``): bodies on
stdin, ``--paginate`` pages joined, ``--include`` on every call so each status and its headers are read; rate limits
waited out within :class:`Limits`, past them (or on a 403 that is no rate limit) a GitHubError, exit 2. The rules and
their source: docs/PR_COMMENT.md, "Cap and rate limits"."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ci.common.errors import HarnessError

GH_TIMEOUT_S = 120


class GitHubError(HarnessError, RuntimeError):
    """A ``gh api`` call that failed; the message has the method, the path and what gh said."""


_STATUS = re.compile(r"HTTP/[0-9.]+ ([0-9]{3})[^\n]*\n")


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]  # names lower-cased
    body: Any  # the JSON value, None when empty

    def rate_limited(self) -> bool:
        if self.status == 429:
            return True
        message = str(self.body.get("message", "")) if isinstance(self.body, dict) else ""
        return self.status == 403 and (
            "retry-after" in self.headers
            or self.headers.get("x-ratelimit-remaining") == "0"
            or "rate limit" in message.lower()
        )


def responses(text: str) -> list[Response]:
    """The responses ``gh api --include`` printed: each a status line, headers, a blank line, a JSON body or none."""
    decoder, at = json.JSONDecoder(), 0
    out: list[Response] = []
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            return out
        match = _STATUS.match(text, at)
        if match is None:
            raise GitHubError(f"gh printed no HTTP status where one was expected: {text[at : at + 120]!r}")
        at, headers = match.end(), {}
        while at < len(text):
            end = text.find("\n", at)
            end = len(text) if end < 0 else end
            line, at = text[at:end].rstrip("\r"), end + 1
            if not line:
                break
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        while at < len(text) and text[at] in " \t\r\n":
            at += 1
        body = None
        if at < len(text) and not _STATUS.match(text, at):
            try:
                body, at = decoder.raw_decode(text, at)
            except ValueError:
                raise GitHubError(f"a response body that is not JSON: {text[at : at + 120]!r}") from None
        out.append(Response(int(match.group(1)), headers, body))


@dataclass(frozen=True)
class Limits:
    """How long to wait on GitHub's rate limits, in all, and between writes."""

    max_wait_s: float = 600.0  # the run's total wait on rate limits; then exit 2 (a re-run resumes)
    first_backoff_s: float = 60.0  # a refusal without retry-after or reset: GitHub asks for at least a minute
    write_interval_s: float = 1.0  # GitHub asks for a second between POST/PATCH/PUT/DELETE requests


@dataclass
class GitHub:
    """``gh api`` calls for one repository, with the environment ``gh`` runs in."""

    repo: str  # OWNER/NAME
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    gh: str = "gh"
    limits: Limits = field(default_factory=Limits)
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time
    waits: list[float] = field(default_factory=list)  # each wait on a rate limit, seconds
    _last_write: float | None = None

    def _once(
        self, method: str, path: str, body: Any, paginate: bool
    ) -> tuple[subprocess.CompletedProcess, list[Response]]:
        exe = shutil.which(self.gh, path=self.env.get("PATH")) or shutil.which(self.gh)
        if exe is None:
            raise GitHubError(f"the GitHub CLI ({self.gh}) is not installed")
        cmd = [exe, "api", "--include", "--method", method, path, "-H", "Accept: application/vnd.github+json"]
        if paginate:
            cmd.append("--paginate")
        if body is not None:
            cmd += ["--input", "-"]
        stdin = None if body is None else json.dumps(body)
        try:
            done = subprocess.run(
                cmd, input=stdin, capture_output=True, text=True, env=dict(self.env), timeout=GH_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            raise GitHubError(f"{method} {path}: gh did not answer in {GH_TIMEOUT_S} s") from None
        try:
            return done, responses(done.stdout)
        except GitHubError:
            if done.returncode == 0:
                raise
            return done, []

    def _wait_for(self, refused: Response, attempt: int) -> float:
        """Seconds to wait before trying again (module doc)."""
        retry_after = refused.headers.get("retry-after", "")
        if retry_after.isdigit():
            return float(retry_after)
        reset = refused.headers.get("x-ratelimit-reset", "")
        if refused.headers.get("x-ratelimit-remaining") == "0" and reset.isdigit():
            return max(0.0, float(reset) - self.clock()) + 1.0
        return self.limits.first_backoff_s * 2**attempt

    def _run(self, method: str, path: str, body: Any = None, paginate: bool = False) -> list[Response]:
        if method != "GET" and self._last_write is not None:
            pause = self._last_write + self.limits.write_interval_s - self.clock()
            if pause > 0:
                self.sleep(pause)
        attempt = 0
        while True:
            done, got = self._once(method, path, body, paginate)
            if method != "GET":
                self._last_write = self.clock()
            if done.returncode == 0:
                return got
            refused = got[-1] if got else None
            if refused is None or not refused.rate_limited():
                said = (done.stderr.strip() or done.stdout.strip())[-500:]
                raise GitHubError(f"{method} {path}: gh exited {done.returncode}: {said}")
            wait = self._wait_for(refused, attempt)
            if sum(self.waits) + wait > self.limits.max_wait_s:
                raise GitHubError(
                    f"{method} {path}: rate limited (HTTP {refused.status}); waiting {wait:.0f} s more would "
                    f"pass this run's limit of {self.limits.max_wait_s:.0f} s (waited "
                    f"{sum(self.waits):.0f} s): stopped; a re-run resumes where this one stopped"
                )
            self.waits.append(wait)
            self.sleep(wait)
            attempt += 1

    def get_all(self, path: str) -> list[Any]:
        """Every item of a list endpoint, all pages (``per_page=100`` unless the path sets it)."""
        sep = "&" if "?" in path else "?"
        items: list[Any] = []
        for page in self._run("GET", path if "per_page=" in path else f"{path}{sep}per_page=100", paginate=True):
            items.extend(page.body if isinstance(page.body, list) else [page.body])
        return items

    def post(self, path: str, body: Mapping[str, Any]) -> Any:
        return self._run("POST", path, body)[-1].body

    def patch(self, path: str, body: Mapping[str, Any]) -> Any:
        return self._run("PATCH", path, body)[-1].body

    def repo_path(self, rest: str) -> str:
        return f"repos/{self.repo}/{rest}"
