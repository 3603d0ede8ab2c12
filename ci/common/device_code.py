"""A commit's compiled device code, read in a child process that imports that commit's kernels (under
``ci.common.commit_tree.kernels_of``): ``python -m ci.common.device_code REQUEST.json RESULT.json``; what it writes and
why one compile per (kernel, config, arch): docs/SPEED_GATE.md, "The speed fingerprint"."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# What the launch carries besides the instructions (shared memory size, warps): part of the code's identity.
LAUNCH_METADATA = ("function", "dynamic_shared_bytes", "num_warps", "num_stages", "k")

# AMDGPU / PTX lines that do not change what executes: debug line info, source
# file names (paths of the checkout), call-frame info for debuggers, producer ident.
_DEBUG_DIRECTIVE = re.compile(r"^\s*\.(loc|file|ident|cfi_\w+)\b")
_DEBUG_LABEL = re.compile(r"^\s*\.Ltmp\d+:\s*$")
_DEBUG_SECTION = re.compile(r"^\s*\.section\s+\"?\.debug_")
_SECTION_START = re.compile(r"^\s*(\.section|\.text\b|\.data\b|\.amdgpu_metadata\b)")
_SASS_ADDRESS = re.compile(r"/\*[0-9a-f]{4,}\*/")


def normalized_amdgpu(text: str) -> str:
    """AMDGPU assembly without comments, debug sections, line info and file paths."""
    kept, in_debug = [], False
    for line in text.splitlines():
        if _DEBUG_SECTION.match(line):
            in_debug = True
            continue
        if in_debug and not _SECTION_START.match(line):
            continue
        in_debug = False
        line = line.split(";", 1)[0].strip()  # ';' starts a comment in AMDGPU assembly
        if line and not _DEBUG_DIRECTIVE.match(line) and not _DEBUG_LABEL.match(line):
            kept.append(" ".join(line.split()))
    return "\n".join(kept)


def normalized_ptx(text: str) -> str:
    """PTX without comments, ``.loc``/``.file`` and the ``.section .debug_*`` blocks."""
    kept, in_debug = [], False
    for line in text.splitlines():
        if in_debug:
            in_debug = line.strip() != "}"
            continue
        if _DEBUG_SECTION.match(line):
            in_debug = "}" not in line
            continue
        line = line.split("//", 1)[0].strip()
        if line and not _DEBUG_DIRECTIVE.match(line) and not _DEBUG_LABEL.match(line):
            kept.append(" ".join(line.split()))
    return "\n".join(kept)


def normalized_sass(text: str) -> str:
    """cuobjdump SASS without the address comments (instructions and encodings, with their scheduling bits, stay)."""
    lines = (" ".join(_SASS_ADDRESS.sub("", line).split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)


def mix_source(artifact: Any) -> tuple[str, str]:
    """(kind, raw text) of what runs: the AMDGPU ISA on gfx, else the SASS when cuobjdump gave it, else the PTX."""
    if artifact.arch.startswith("gfx"):
        return "amdgcn", artifact.assembly
    sass = dict(artifact.extra).get("sass")
    return ("sass", sass) if sass else ("ptx", artifact.assembly)


def device_code(artifact: Any) -> tuple[str, str]:
    """(kind, normalized text) of :func:`mix_source`, with the launch metadata."""
    kind, text = mix_source(artifact)
    extra = dict(artifact.extra)
    launch = "\n".join(f"{key}={extra[key]}" for key in LAUNCH_METADATA if key in extra)
    normalized = {"amdgcn": normalized_amdgpu, "sass": normalized_sass, "ptx": normalized_ptx}[kind](text)
    return kind, f"{normalized}\n--launch--\n{launch}"


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# The child


def describe_registry(archs: Sequence[str]) -> dict[str, Any]:
    """The tree's kernels and, per arch, the benchmarks the speed gate would time there."""
    from asv_bench.common import CPU_EXCLUDED_BACKENDS as cpu_excluded
    from asv_bench.common import CPU_SHAPES as cpu_shapes
    from harness.shapes import BENCHMARK_SHAPES
    from kernels import devices
    from kernels.registry import all_kernels

    kernels = [
        {
            "name": k.name,
            "module": type(k).__module__,
            "backend": k.backend,
            "configs": list(k.configs),
            "runs_on": list(k.runs_on),
            "compile_archs": list(k.compile_archs),
        }
        for k in all_kernels()
    ]
    benchmarks: dict[str, list[dict[str, Any]]] = {arch: [] for arch in archs}
    for kernel, arch in itertools.product(all_kernels(), archs):
        if not devices.arch_matches(arch, kernel.runs_on) or (arch == "cpu" and kernel.backend in cpu_excluded):
            continue
        benchmarks[arch] += [
            {"kernel": kernel.name, "config": config, "shape": s.name, "m": s.m, "n": s.n, "k": s.k}
            for config in kernel.configs
            for s in (cpu_shapes if arch == "cpu" else BENCHMARK_SHAPES)
            if _supports(kernel, (s.m, s.n, s.k), config)
        ]
    return {"kernels": kernels, "benchmarks": benchmarks}


def _supports(kernel: Any, mnk: tuple[int, int, int], config: str) -> bool:
    from kernels.registry import UnsupportedShape

    try:
        kernel.check_shape(*mnk, config)
        return True
    except UnsupportedShape:
        return False


def compile_targets(targets: Sequence[Sequence[str]]) -> dict[str, dict[str, Any]]:
    """``{kernel/arch/config: {"ok": True, digest, kind, mix_kind, mix_text, usage} | {"ok": False, "error"}}``."""
    from harness.resources import target_id, usage_from_artifact
    from kernels.registry import get_kernel

    results: dict[str, dict[str, Any]] = {}
    for kernel, arch, config in targets:
        name = target_id(kernel, arch, config)
        print(f"compiling {name} ...", file=sys.stderr, flush=True)
        try:
            artifact = get_kernel(kernel).compile_only(arch, config)
            kind, text = device_code(artifact)
            mix_kind, mix_text = mix_source(artifact)
        except Exception as exc:  # a kernel that fails to compile is a result: "measure", with why
            results[name] = {"ok": False, "error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:600]}"}
            continue
        try:
            usage = usage_from_artifact(artifact).to_dict()
        except Exception as exc:  # resources are for the report; the fingerprint does not need them
            usage = {"error": f"{type(exc).__name__}: {exc}"}
        results[name] = {
            "ok": True,
            "digest": digest(text),
            "kind": kind,
            "mix_kind": mix_kind,
            "mix_text": mix_text,
            "usage": usage,
        }
    return results


def run_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """What the child computes: ``{"archs": [...], "compile": bool, "kernels": [name patterns] | None}``."""
    from ci.common.options import name_matches

    archs = list(request["archs"])
    described = describe_registry(archs)
    wanted = request.get("kernels") or ()
    targets = sorted(
        (k["name"], arch, config)
        for k in described["kernels"]
        if name_matches(k["name"], wanted)
        for arch in archs
        if arch in k["compile_archs"]
        for config in k["configs"]
    )
    described["compiled"] = compile_targets(targets) if request.get("compile", True) else {}
    return described


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m ci.common.device_code REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    result = run_request(json.loads(Path(argv[0]).read_text()))
    Path(argv[1]).write_text(json.dumps(result))  # read by the parent only after a clean exit
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
