"""Run today's measuring code on another commit's kernels, in a child process.

The gates compare two commits. For the comparison to mean anything, both must
be measured the same way: by this checkout's harness/ and ci/ code, with only
the code under test -- the commit's ``kernels`` package -- taken from the
commit's worktree. Python resolves a top-level package from the first
``sys.path`` entry that has it, so the child's path is:

1. a private folder holding one entry, ``kernels`` -> the worktree's kernels/
   (a symlink), so only ``kernels`` comes from the commit;
2. this checkout's root, for ``harness`` and ``ci`` (its ``kernels`` is shadowed by 1).

The child also starts in that private folder: ``python -m`` puts the current
directory first on ``sys.path``, and a checkout there would shadow both.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

REPO_ROOT = Path(__file__).resolve().parents[1]


class NotAKernelsTree(RuntimeError):
    """The worktree has no kernels/ package: nothing there can be measured."""


def has_kernels(tree: Path) -> bool:
    return (Path(tree) / "kernels" / "__init__.py").is_file()


@contextmanager
def kernels_of(tree: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """(folder to run in, environment) for a child that imports ``tree``'s kernels and this checkout's harness/ci."""
    if not has_kernels(tree):
        raise NotAKernelsTree(f"{tree} has no kernels/__init__.py")
    kernels_dir = Path(tree) / "kernels"
    folder = Path(tempfile.mkdtemp(prefix="commit-kernels-"))
    try:
        (folder / "kernels").symlink_to(kernels_dir.resolve(), target_is_directory=True)
        env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "GITHUB_STEP_SUMMARY")}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(folder), str(REPO_ROOT), env.get("PYTHONPATH")) if p)
        yield folder, env
    finally:
        shutil.rmtree(folder, ignore_errors=True)
