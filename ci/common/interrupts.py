"""SIGINT/SIGTERM for the gates (tracked children killed, :class:`Interrupted` raised in the main thread), and what a
SIGKILLed run left behind (:func:`sweep_stale`): docs/RELIABILITY.md, "Signals and leftovers".
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

MARKER = "mxfp4-gate-"  # every temporary folder of the gates: mxfp4-gate-<pid>-<kind>-<random>
_OWNED = re.compile(re.escape(MARKER) + r"(\d+)-")

_children: set[subprocess.Popen] = set()
_lock = threading.Lock()


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM: unwind cleanly (a KeyboardInterrupt, so no ``except Exception`` on the way swallows it)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def tracked(proc: subprocess.Popen) -> Iterator[subprocess.Popen]:
    """While inside, ``proc`` is killed when the run is interrupted (even when a worker thread waits on it)."""
    with _lock:
        _children.add(proc)
    try:
        yield proc
    finally:
        with _lock:
            _children.discard(proc)


def stop_children() -> int:
    """Kill every tracked child now; returns how many were running."""
    with _lock:
        running = [p for p in _children if p.poll() is None]
    for proc in running:
        with suppress(OSError):
            proc.kill()
    return len(running)


def _handler(signum, frame):
    stop_children()
    raise Interrupted(signum)


def install() -> None:
    """SIGINT and SIGTERM: stop the tracked children, then raise Interrupted in the main thread. Both are unblocked
    too: a blocked signal mask is inherited across exec, and a command started with them blocked (by a launcher that
    blocked them in its own thread) would leave a cancel pending until SIGKILL."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _handler)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})


def ignore() -> None:
    """From now on both signals are ignored: a second Ctrl-C must not break a clean-up into a traceback. Only where
    :func:`install` put this module's handlers (a command's run), from the main thread: a caller with its own (a test)
    keeps them."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        return
    for signum in (signal.SIGTERM, signal.SIGINT):
        if signal.getsignal(signum) is _handler:
            signal.signal(signum, signal.SIG_IGN)


def temp_dir(kind: str) -> Path:
    """A new temporary folder named for this process, so that a later run can sweep it once we are gone."""
    return Path(tempfile.mkdtemp(prefix=f"{MARKER}{os.getpid()}-{kind}-"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        pass
    return True


def sweep_stale(log: Callable[[str], None] | None = None, root: Path | None = None) -> list[Path]:
    """Remove the temporary folders (worktrees included) of gate runs whose process is dead; returns them.
    Call ``git worktree prune`` afterwards in the repository: git then forgets the removed worktrees."""
    removed: list[Path] = []
    try:
        entries = list((Path(tempfile.gettempdir()) if root is None else root).iterdir())
    except OSError:
        return removed
    for entry in entries:
        owner = _OWNED.match(entry.name)
        if owner is None or int(owner.group(1)) == os.getpid() or _alive(int(owner.group(1))):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
        if log is not None:
            log(f"removed {entry}, left by a gate run that was killed (pid {owner.group(1)})")
    return removed
