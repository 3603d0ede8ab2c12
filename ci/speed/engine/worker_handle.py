"""The parent's handle on one warm worker (ci.speed.engine.worker): start it, ask it, end it. Nothing here imports
torch. Every read has a time limit: a worker that dies (end-of-file) or hangs (killed at the limit) raises
:class:`WorkerFailed` naming the side, the device and what was asked, with the worker's last stderr lines.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from ci.common.commit_tree import kernels_of
from ci.common.errors import HarnessError

QUIT_TIMEOUT_S = 15.0
_END = object()  # the worker closed its stdout


class WorkerFailed(HarnessError, RuntimeError):
    """A worker died, hung, or refused a request; the message names side, device and request."""


class WorkerProcess:
    """One running ``python -m ci.speed.engine.worker`` on ``tree``'s kernels, pinned by ``extra_env``."""

    def __init__(
        self,
        tree: Path,
        *,
        side: str,
        device_index: int,
        generation: int,
        extra_env: Mapping[str, str] | None = None,
        log: Callable[[str], None] | None = None,
    ):
        self.side, self.device_index, self.generation = side, device_index, generation
        self.name = f"{side} worker {generation} on device {device_index}"
        self._stack = ExitStack()
        try:  # an interrupt here (the main thread's signal) must not leave the kernels folder behind
            folder, env = self._stack.enter_context(kernels_of(tree))
            env.update(extra_env or {})
            self.spawned_at = time.time()
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "ci.speed.engine.worker"],
                cwd=folder,
                env=env,
                text=True,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except BaseException:
            self._stack.close()
            raise
        self.pid = self._proc.pid
        # Held while a request waits for its answer. The worker reads its next request only after answering this one:
        # a "quit" sent to a busy worker would wait for the end of its timing (or hang), and its answer would be
        # taken by the other waiter; so quit() kills a busy worker instead.
        self._asking = threading.Lock()
        self._answers: queue.Queue[Any] = queue.Queue()
        self._stderr: deque[str] = deque(maxlen=200)
        prefix = f"  [dev {device_index} {side} w{generation}] "
        self._readers = [
            threading.Thread(target=self._read_answers, daemon=True),
            threading.Thread(target=self._read_stderr, args=(log, prefix), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    # -- reading --------------------------------------------------------------

    def _read_answers(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            if line.strip():
                self._answers.put(line)
        self._answers.put(_END)

    def _read_stderr(self, log: Callable[[str], None] | None, prefix: str) -> None:
        assert self._proc.stderr is not None
        for line in self._proc.stderr:
            self._stderr.append(line.rstrip())
            if log is not None:
                log(prefix + line.rstrip())

    def stderr_tail(self, count: int = 3) -> str:
        """The last ``count`` meaningful stderr lines (library warnings skipped)."""
        useful = [line for line in list(self._stderr) if line.strip() and "Warning" not in line]
        return " | ".join(useful[-count:]) or "(no output)"

    # -- asking ---------------------------------------------------------------

    def request(self, message: Mapping[str, Any], *, timeout_s: float, what: str) -> dict[str, Any]:
        """Send one request, wait at most ``timeout_s`` for its answer; :class:`WorkerFailed` otherwise."""
        with self._asking:
            return self._ask(message, timeout_s=timeout_s, what=what)

    @property
    def busy(self) -> bool:
        """A request is waiting for its answer (the worker is preparing, surveying or timing)."""
        return self._asking.locked()

    def _ask(self, message: Mapping[str, Any], *, timeout_s: float, what: str) -> dict[str, Any]:
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.write(json.dumps(message) + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            self._fail(f"could not send {what}: {exc}")
        try:
            line = self._answers.get(timeout=timeout_s)
        except queue.Empty:
            self.kill()
            self._fail(f"no answer to {what} within {timeout_s:.0f} s (killed)")
        if line is _END:
            try:
                code = self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()
                code = self._proc.returncode
            self._fail(f"exited {code} during {what}")
        try:
            answer = json.loads(line)
        except ValueError:
            self.kill()
            self._fail(f"answered {what} with a line that is not JSON: {line[:200]!r}")
        if not answer.get("ok"):
            raise WorkerFailed(f"{self.name} (pid {self.pid}) refused {what}: {answer.get('error')}")
        return answer

    def _fail(self, what: str) -> None:
        self._readers[1].join(timeout=2)  # the last words of a dying worker are its most useful
        raise WorkerFailed(f"{self.name} (pid {self.pid}) {what}: {self.stderr_tail()}")

    # -- ending ---------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    def quit(self, exit_timeout_s: float = QUIT_TIMEOUT_S) -> None:
        """Ask it to end; kill it when it does not answer within QUIT_TIMEOUT_S or exit within ``exit_timeout_s``,
        or at once while it is busy with a request (docs/SPEED_GATE.md, "ci/speed/engine/worker.py"). Never raises."""
        if self.alive and self._asking.acquire(blocking=False):
            try:
                self._ask({"op": "quit"}, timeout_s=QUIT_TIMEOUT_S, what="quit")
                self._proc.wait(timeout=exit_timeout_s)
            except (WorkerFailed, subprocess.TimeoutExpired):
                pass
            finally:
                self._asking.release()
        self.kill()

    def kill(self) -> None:
        if self.alive:
            self._proc.kill()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        try:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
        except OSError:
            pass
        for reader in self._readers:  # a dead worker's pipes end: its readers finish on their own
            reader.join(timeout=2)
        self._stack.close()
