"""The one way to compile a kernel in a clean child process.

For compilers that cannot be driven from the asking process: Triton under ``TRITON_INTERPRET=1`` and
FlyDSL, whose compile-only switches are read once per process. Protocol: ``python -m
kernels.compile_child REQUEST.json RESULT.json``; the request names a function (``"module:function"``)
and its keyword arguments, the child calls it and writes the returned
:class:`~kernels.artifact.CompiledArtifact` as JSON. It knows no kernel; the child imports the SAME
``kernels`` package as the parent, without ``TRITON_INTERPRET``; errors come back with the child's
last lines of stderr. docs/MEASURING.md, "A clean child to compile in".
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kernels.artifact import CompiledArtifact

# A cold Triton/FlyDSL import plus one GEMM compile takes 5-30 s on a 2-core CPU.
CHILD_TIMEOUT_S = 900
# Variables that put a compiler in a mode that cannot compile for a GPU.
_STRIPPED_ENV = ("TRITON_INTERPRET",)


def _package_parent() -> str:
    """The folder holding this ``kernels`` package, symlinks NOT resolved (a worktree's kernels may be a link)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in (os.environ if environ is None else environ).items() if k not in _STRIPPED_ENV}
    # This kernels package first, then whatever the parent could import (site-packages, the harness, test modules).
    path = [_package_parent(), *(p for p in sys.path if p), *env.get("PYTHONPATH", "").split(os.pathsep)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in path if p))
    return env


def call_in_child(
    function: str, kwargs: Mapping[str, Any], *, what: str, timeout_s: float = CHILD_TIMEOUT_S
) -> CompiledArtifact:
    """Run ``function`` ("module:name", returning a CompiledArtifact) with JSON ``kwargs`` in a clean child."""
    with tempfile.TemporaryDirectory(prefix="compile-child-") as tmp:
        request, result = Path(tmp, "request.json"), Path(tmp, "artifact.json")
        request.write_text(json.dumps({"function": function, "kwargs": dict(kwargs)}))
        cmd = [sys.executable, "-m", "kernels.compile_child", str(request), str(result)]
        try:
            proc = subprocess.run(
                cmd, cwd=_package_parent(), env=child_environment(), capture_output=True, text=True, timeout=timeout_s
            )
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"compiling {what} in a child process took over {timeout_s:.0f} s") from None
        if proc.returncode != 0 or not result.exists():
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
            raise RuntimeError(f"compiling {what} in a child process failed (exit {proc.returncode}):\n{tail}")
        return CompiledArtifact(**json.loads(result.read_text()))


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m kernels.compile_child REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    request = json.loads(Path(argv[0]).read_text())
    module, _, name = request["function"].partition(":")
    artifact = getattr(importlib.import_module(module), name)(**request["kwargs"])
    if not isinstance(artifact, CompiledArtifact):
        raise TypeError(f"{request['function']} returned {type(artifact).__name__}, not a CompiledArtifact")
    data = asdict(artifact)
    data["extra"] = dict(artifact.extra)
    # Read only after a clean exit, so a plain write cannot be read half-written.
    Path(argv[1]).write_text(json.dumps(data))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
