"""Run today's measuring code (this checkout's harness/ and ci/) on another commit's kernels, in a child process whose
``sys.path`` starts with a private folder holding one symlink, ``kernels`` -> the commit's kernels/ (it starts there,
as ``python -m`` puts the current directory first), then this checkout's root, whose ``kernels`` is thus shadowed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from ci.common.errors import InputError
from ci.common.interrupts import temp_dir, tracked

REPO_ROOT = Path(__file__).resolve().parents[2]


class NotAKernelsTree(InputError, RuntimeError):
    """The worktree has no kernels/ package: nothing there can be measured."""


def has_kernels(tree: Path) -> bool:
    return (Path(tree) / "kernels" / "__init__.py").is_file()


@contextmanager
def kernels_of(tree: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """(folder to run in, environment) for a child that imports ``tree``'s kernels and this checkout's harness/ci."""
    if not has_kernels(tree):
        raise NotAKernelsTree(f"{tree} has no kernels/__init__.py")
    kernels_dir = Path(tree) / "kernels"
    folder = temp_dir("commit-kernels")
    try:
        (folder / "kernels").symlink_to(kernels_dir.resolve(), target_is_directory=True)
        env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "GITHUB_STEP_SUMMARY")}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(folder), str(REPO_ROOT), env.get("PYTHONPATH")) if p)
        yield folder, env
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True)
class ChildRun:
    """How a child process ended: its exit code (None: killed at the time limit) and its stderr lines."""

    returncode: int | None
    lines: tuple[str, ...]

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def tail(self, count: int = 1) -> str:
        """The last ``count`` meaningful stderr lines (library warnings skipped), for a one-line error."""
        useful = [line for line in self.lines if line.strip() and "Warning" not in line]
        return " | ".join(useful[-count:]) or "(no output)"


def run_forwarding_stderr(
    cmd: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    log: Callable[[str], None],
    timeout_s: float,
) -> ChildRun:
    """Run ``cmd``, echoing each stderr line (its progress) through ``log`` as it comes; stdout is discarded. The child
    is killed at ``timeout_s`` (``ChildRun.timed_out``) and on any interruption of this process (Ctrl-C, a cancelled
    job), so no child is left measuring or compiling."""
    proc = subprocess.Popen(
        list(cmd), cwd=cwd, env=dict(env), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    lines: list[str] = []

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line.rstrip())
            log(line.rstrip())

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    returncode: int | None = None
    # tracked: ci.common.interrupts kills it on SIGINT/SIGTERM, whichever thread waits here
    with tracked(proc), suppress(subprocess.TimeoutExpired):
        try:
            returncode = proc.wait(timeout=timeout_s)
        finally:
            if returncode is None:  # timed out or interrupted
                proc.kill()
                proc.wait()
    reader.join(timeout=10)
    return ChildRun(returncode, tuple(lines))
