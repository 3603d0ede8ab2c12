"""A local stand-in for the few GitHub REST endpoints ci.notify calls, for ``gh api`` to talk to (issue 30).

GitHub itself cannot be reached from this project's machines, so the posting is tested
against this server: stdlib ``http.server`` on 127.0.0.1 (an ephemeral port), over TLS with
a self-signed certificate made by ``openssl`` for the test (``gh`` speaks only HTTPS to a
host; ``SSL_CERT_FILE`` makes it trust the certificate). ``gh`` treats any host but
github.com as GitHub Enterprise, so the paths arrive under ``/api/v3``.

Endpoints, with GitHub's shapes as far as ci.notify reads them:

- ``GET  /repos/{o}/{r}/pulls?state=open&head=OWNER:BRANCH``
- ``GET  /repos/{o}/{r}/issues/{n}/comments``, ``POST`` the same; ``PATCH /repos/{o}/{r}/issues/comments/{id}``
- ``GET  /repos/{o}/{r}/issues?state=all&labels=L&creator=LOGIN``, ``POST /repos/{o}/{r}/issues``,
  ``PATCH /repos/{o}/{r}/issues/{n}`` (title, body, state, state_reason, labels)
- ``GET  /repos/{o}/{r}/labels``, ``POST`` the same
- ``GET  /repos/{o}/{r}/pulls/{n}/files`` (GitHub stops at 3000 files; so does this)
- ``POST /repos/{o}/{r}/statuses/{sha}``
- ``GET  /repos/{o}/{r}/actions/runs/{id}/attempts/{n}/jobs`` and ``.../actions/runs/{id}/artifacts`` (one page, as set)

Rate limits, when asked (issue 38): :meth:`State.refuse` queues refusals for the next
requests (a 403 or 429 with ``retry-after``, or ``x-ratelimit-remaining: 0`` and a reset time,
or neither, as GitHub's secondary limits come), and ``State.write_burst = N`` refuses every
write after N accepted ones in a row with a 403 and ``retry-after`` (a flood). What is refused
is not carried out, as on GitHub, and is kept in ``refused``.

Lists are paginated (``per_page``, ``page``, a ``Link: <...>; rel="next"`` header), so a
client that reads only the first page is caught. A request without the token is 401;
anything else is 404. Every request is kept in ``requests`` (method, path, JSON body).
"""

from __future__ import annotations

import json
import re
import shutil
import ssl
import subprocess
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

TOKEN = "fake-token"
BOT = "github-actions[bot]"


@dataclass
class State:
    repo: str = "OWNER/REPO"
    pulls: list[dict[str, Any]] = field(default_factory=list)
    issues: list[dict[str, Any]] = field(default_factory=list)  # each: number, title, body, state, labels, user
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # issue/PR number -> comments
    labels: list[dict[str, Any]] = field(default_factory=list)
    files: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # PR number -> its changed files
    statuses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # sha -> the statuses posted, in order
    runs: dict[int, dict[str, Any]] = field(default_factory=dict)  # run id -> {"jobs": [...], "artifacts": [...]}
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    next_id: int = 1000
    refusals: list[tuple[int, dict[str, str], str, bool]] = field(
        default_factory=list
    )  # status, headers, message, writes only
    write_burst: int | None = None  # refuse the write after this many accepted in a row (403, retry-after)
    burst_retry_after: str = "1"
    refused: list[tuple[str, str, int]] = field(default_factory=list)  # method, path, status
    refused_at: list[int] = field(default_factory=list)  # each refused request's position in ``requests``
    # (method, path pattern): the next write that matches is refused once, 403 with retry-after 60 s (a stopped run)
    aimed: list[tuple[str, str]] = field(default_factory=list)
    _burst: int = 0

    def refuse(
        self,
        count: int = 1,
        status: int = 403,
        headers: dict[str, str] | None = None,
        message: str = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
        writes_only: bool = True,
    ) -> None:
        """The next ``count`` requests (writes only, unless told) are refused with ``status`` and ``headers``."""
        self.refusals += [(status, dict(headers or {}), message, writes_only)] * count

    def refuse_write(self, method: str, path: str) -> None:
        """The next ``method`` request whose path matches the regular expression ``path`` is refused once (a 403 with
        ``retry-after: 60``): one kind of write hit by a rate limit."""
        self.aimed.append((method, path))

    def _refusal(self, method: str, path: str = "") -> tuple[int, dict[str, str], str] | None:
        for i, (m, pattern) in enumerate(self.aimed):
            if m == method and re.search(pattern, path):
                del self.aimed[i]
                return 403, {"Retry-After": "60"}, "You have exceeded a secondary rate limit."
        for i, (status, headers, message, writes_only) in enumerate(self.refusals):
            if method != "GET" or not writes_only:
                del self.refusals[i]
                return status, headers, message
        if method != "GET" and self.write_burst is not None:
            if self._burst >= self.write_burst:
                self._burst = 0
                return 403, {"Retry-After": self.burst_retry_after}, "You have exceeded a secondary rate limit."
            self._burst += 1
        return None

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def add_pull(self, number: int, head_repo: str, branch: str, sha: str, state: str = "open") -> None:
        self.pulls.append(
            {
                "number": number,
                "state": state,
                "head": {"ref": branch, "sha": sha, "repo": {"full_name": head_repo}},
                "base": {"ref": "main", "repo": {"full_name": self.repo}},
            }
        )

    def add_comment(self, number: int, body: str, login: str) -> dict[str, Any]:
        comment = {"id": self.new_id(), "body": body, "user": {"login": login}}
        self.comments.setdefault(number, []).append(comment)
        return comment

    def writes(self) -> list[tuple[str, str, Any]]:
        return [r for r in self.requests if r[0] != "GET"]


class _Handler(BaseHTTPRequestHandler):
    state: State  # set on the subclass a server makes
    base: str

    def log_message(self, *args: Any) -> None:  # quiet: the test reads `requests`
        pass

    def _send(self, code: int, data: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(data).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _page(self, items: list[Any], query: dict[str, str], path: str) -> None:
        per_page = min(int(query.get("per_page", 30)), 100)
        page = int(query.get("page", 1))
        chunk = items[(page - 1) * per_page : page * per_page]
        headers = {}
        if page * per_page < len(items):
            nxt = urllib.parse.urlencode({**query, "page": page + 1})
            headers["Link"] = f'<{self.base}{path}?{nxt}>; rel="next"'
        self._send(200, chunk, headers)

    def _body(self) -> bytes:
        """The request body: ``gh api --input -`` streams stdin, so it comes chunked (no Content-Length)."""
        if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))
        data = b""
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                self.rfile.readline()
                return data
            data += self.rfile.read(size)
            self.rfile.readline()

    def _handle(self, method: str) -> None:
        url = urllib.parse.urlsplit(self.path)
        path, query = url.path, dict(urllib.parse.parse_qsl(url.query))
        raw = self._body()
        body = json.loads(raw) if raw else None
        s = self.state
        s.requests.append((method, f"{path}{'?' + url.query if url.query else ''}", body))
        if self.headers.get("Authorization") != f"token {TOKEN}":
            return self._send(401, {"message": "Bad credentials"})
        if refusal := s._refusal(method, path):
            status, headers, message = refusal
            s.refused.append((method, path, status))
            s.refused_at.append(len(s.requests) - 1)
            return self._send(
                status, {"message": message, "documentation_url": "https://docs.github.com/rest"}, headers
            )
        prefix = f"/api/v3/repos/{s.repo}/"
        if not path.startswith(prefix):
            return self._send(404, {"message": "Not Found"})
        rest = path[len(prefix) :]
        if rest == "pulls" and method == "GET":
            owner, _, branch = query.get("head", ":").partition(":")
            found = [
                p
                for p in s.pulls
                if p["state"] == query.get("state", "open")
                and (
                    not query.get("head")
                    or (p["head"]["repo"]["full_name"].split("/")[0] == owner and p["head"]["ref"] == branch)
                )
            ]
            return self._page(found, query, path)
        if (match := re.fullmatch(r"actions/runs/(\d+)/(?:attempts/\d+/)?(jobs|artifacts)", rest)) and method == "GET":
            run = s.runs.get(int(match.group(1)))
            if run is None:
                return self._send(404, {"message": "Not Found"})
            items = run.get(match.group(2), [])
            return self._send(200, {"total_count": len(items), match.group(2): items})
        if (match := re.fullmatch(r"pulls/(\d+)/files", rest)) and method == "GET":
            if not any(p["number"] == int(match.group(1)) for p in s.pulls):
                return self._send(404, {"message": "Not Found"})
            return self._page(s.files.get(int(match.group(1)), [])[:3000], query, path)
        if (match := re.fullmatch(r"statuses/([0-9a-f]{40})", rest)) and method == "POST":
            if body.get("state") not in ("error", "failure", "pending", "success"):
                return self._send(422, {"message": "Validation Failed"})
            if len(body.get("description") or "") > 140:
                return self._send(
                    422, {"message": "Validation Failed: description is too long (maximum is 140 characters)"}
                )
            status = {"id": s.new_id(), **body}
            s.statuses.setdefault(match.group(1), []).append(status)
            return self._send(201, status)
        if match := re.fullmatch(r"issues/(\d+)/comments", rest):
            number = int(match.group(1))
            if method == "GET":
                return self._page(s.comments.get(number, []), query, path)
            if method == "POST":
                return self._send(201, s.add_comment(number, body["body"], BOT))
        if (match := re.fullmatch(r"issues/comments/(\d+)", rest)) and method == "PATCH":
            for comments in s.comments.values():
                for c in comments:
                    if c["id"] == int(match.group(1)):
                        if c["user"]["login"] != BOT:
                            return self._send(403, {"message": "Resource not accessible by integration"})
                        c["body"] = body["body"]
                        return self._send(200, c)
            return self._send(404, {"message": "Not Found"})
        if rest == "issues" and method == "GET":
            label, creator = query.get("labels"), query.get("creator")
            found = [
                i
                for i in s.issues
                if (query.get("state") == "all" or i["state"] == query.get("state", "open"))
                and (not label or label in [lb["name"] for lb in i["labels"]])
                and (not creator or i["user"]["login"] == creator)
            ]
            return self._page(
                sorted(found, key=lambda i: i["number"], reverse=query.get("direction") != "asc"), query, path
            )
        if (match := re.fullmatch(r"issues/(\d+)", rest)) and method == "PATCH":
            issue = next((i for i in s.issues if i["number"] == int(match.group(1))), None)
            if issue is None:
                return self._send(404, {"message": "Not Found"})
            for key in ("title", "body", "state", "state_reason"):
                if key in body:
                    issue[key] = body[key]
            if "labels" in body:
                issue["labels"] = [{"name": n} for n in body["labels"]]
            return self._send(200, issue)
        if rest == "issues" and method == "POST":
            number = max([0, *(i["number"] for i in s.issues), *(p["number"] for p in s.pulls)]) + 1
            issue = {
                "number": number,
                "title": body["title"],
                "body": body["body"],
                "state": "open",
                "labels": [{"name": n} for n in body.get("labels", [])],
                "user": {"login": BOT},
            }
            s.issues.append(issue)
            return self._send(201, issue)
        if rest == "labels":
            if method == "GET":
                return self._page(s.labels, query, path)
            if method == "POST":
                s.labels.append(dict(body))
                return self._send(201, body)
        return self._send(404, {"message": "Not Found"})

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")


class FakeGitHub:
    """The server, running in a thread; ``env`` is what ``gh`` needs to talk to it."""

    def __init__(self, folder: Path, state: State | None = None) -> None:
        openssl = shutil.which("openssl")
        if openssl is None:
            raise RuntimeError("openssl is not installed: it makes the fake server's certificate")
        self.cert, key = folder / "cert.pem", folder / "key.pem"
        subprocess.run(
            [
                openssl,
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                str(key),
                "-out",
                str(self.cert),
                "-days",
                "1",
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
            ],
            check=True,
            capture_output=True,
        )
        self.state = state or State()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (_Handler,), {"state": self.state}))
        self.port = self.server.server_address[1]
        self.server.RequestHandlerClass.base = f"https://127.0.0.1:{self.port}"
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.folder = folder

    def __enter__(self) -> FakeGitHub:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def env(self, base: dict[str, str]) -> dict[str, str]:
        home = self.folder / "gh-home"
        home.mkdir(exist_ok=True)
        drop = {
            "GH_TOKEN",
            "GITHUB_TOKEN",
            "GH_ENTERPRISE_TOKEN",
            "GITHUB_ENTERPRISE_TOKEN",
            "GH_REPO",
            "GITHUB_STEP_SUMMARY",
        }
        return {
            **{k: v for k, v in base.items() if k not in drop},
            "GH_HOST": f"127.0.0.1:{self.port}",
            "GH_ENTERPRISE_TOKEN": TOKEN,
            "SSL_CERT_FILE": str(self.cert),
            "GH_CONFIG_DIR": str(home),
            "HOME": str(home),
            "GH_NO_UPDATE_NOTIFIER": "1",
            "GH_PROMPT_DISABLED": "1",
            "NO_COLOR": "1",
        }
