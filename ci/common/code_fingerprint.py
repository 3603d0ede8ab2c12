"""Speed fingerprints: per (kernel, config, arch), the parts of a commit that can change what a benchmark's timed region
runs; an unknown part means "measure", never skip on doubt (docs/SPEED_GATE.md, "The speed fingerprint").
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ci.common import launch_path
from ci.common.commit_tree import REPO_ROOT, kernels_of, run_forwarding_stderr
from ci.common.errors import HarnessError
from ci.common.interrupts import MARKER
from ci.common.options import name_matches

DEFAULT_ARCHS = ("sm_90", "gfx950")
# Loading a registry and compiling 8 targets takes ~20 s cold on a 2-core CPU; a hung compiler must not hold the job.
CHILD_TIMEOUT_S = 900
TORCH_OPS = "none (torch ops)"
# On a CPU run nothing is compiled for a device: what runs is the launch path (torch ops on the CPU).
CPU_ARCH = "cpu"
NO_DEVICE_CODE = "none (cpu: no compiled device code)"


class UnknownReason(enum.Enum):
    REGISTRY_FAILED = "the tree's kernel registry could not be loaded"
    MODULE_NOT_FOUND = "a module on the launch path is missing"
    SOURCE_UNPARSABLE = "a module on the launch path is not valid Python"
    COMPILE_FAILED = "the compile-only build failed"
    NO_COMPILE_PATH = "the kernel has no compile-only path for this arch"
    NOT_AT_BASE = "new at head (no base fingerprint)"
    ENVIRONMENT = "a version could not be read"


@dataclass(frozen=True)
class Part:
    """One part of a fingerprint: a digest, or unknown with a reason."""

    digest: str | None
    reason: UnknownReason | None = None
    detail: str = ""
    files: Mapping[str, str] = field(default_factory=dict)  # launch path: {relative path: digest}

    @classmethod
    def unknown(cls, reason: UnknownReason, detail: str) -> Part:
        return cls(None, reason, detail)

    @property
    def known(self) -> bool:
        return self.digest is not None

    def __str__(self) -> str:
        if self.digest is not None:
            return self.digest[:16]
        assert self.reason is not None, "an unknown part is made by Part.unknown, with its reason"
        return f"unknown ({self.reason.value}: {self.detail})"


@dataclass(frozen=True)
class Fingerprint:
    kernel: str
    config: str
    arch: str
    launch_path: Part
    device_code: Part
    environment: Part | None = None

    def parts(self) -> dict[str, Part]:
        parts = {"launch path": self.launch_path, "device code": self.device_code}
        if self.environment is not None:
            parts["environment"] = self.environment
        return parts

    def to_json(self) -> dict[str, Any]:
        return {name: str(part) for name, part in self.parts().items()}


@dataclass
class TreeFingerprints:
    """A tree's fingerprints by (kernel, config, arch), its benchmarks per arch, and its compile results."""

    fingerprints: dict[tuple[str, str, str], Fingerprint]
    benchmarks: dict[str, list[dict[str, Any]]]  # arch -> [{kernel, config, shape, m, n, k}]
    compiled: dict[str, dict[str, Any]]  # kernel/arch/config -> device_code.compile_targets() entry
    failure: str | None = None  # the registry could not be loaded: every benchmark is "measure"


class Outcome(enum.Enum):
    IDENTICAL = "unchanged (identical code)"
    DIFFERS = "changed"
    UNKNOWN = "measure"
    REMOVED = "removed at head"  # the base has the benchmark, the head does not: nothing to measure or skip


@dataclass(frozen=True)
class Comparison:
    outcome: Outcome
    what: tuple[str, ...] = ()  # DIFFERS: "launch path: kernels/x.py", "sm_90 code of CONFIG"
    reason: UnknownReason | None = None  # UNKNOWN
    detail: str = ""

    def describe(self) -> str:
        if self.outcome in (Outcome.IDENTICAL, Outcome.REMOVED):
            return self.outcome.value
        if self.outcome is Outcome.DIFFERS:
            return "changed: " + "; ".join(self.what)
        assert self.reason is not None, "an UNKNOWN comparison is made with its reason"
        return f"measure: {self.reason.value}" + (f" ({self.detail})" if self.detail else "")


# Computing

_CACHE: dict[tuple, TreeFingerprints] = {}


def fingerprint_tree(
    tree: Path,
    archs: Sequence[str] = DEFAULT_ARCHS,
    *,
    kernels: Sequence[str] | None = None,
    with_environment: bool = False,
    log: Callable[[str], None] = lambda line: None,
) -> TreeFingerprints:
    """The fingerprints of every (kernel, config, arch) of ``tree``'s registry (``kernels``: only names matching these),
    cached per kernels/ content within this process: a tree compiled once is not compiled again."""
    key = (kernels_content_digest(tree), tuple(archs), tuple(sorted(kernels or ())), with_environment)
    if key in _CACHE:
        return _CACHE[key]
    try:
        child = _run_child(Path(tree), {"archs": list(archs), "kernels": list(kernels) if kernels else None}, log)
    except ChildFailed as exc:
        _CACHE[key] = TreeFingerprints({}, {arch: [] for arch in archs}, {}, failure=str(exc))
        return _CACHE[key]
    environment = environment_part() if with_environment else None
    fingerprints = {}
    for kernel in child["kernels"]:
        if not name_matches(kernel["name"], kernels or ()):
            continue
        launch = launch_part(tree, kernel["module"])
        for arch in archs:
            for config in kernel["configs"]:
                device = device_part(kernel, arch, config, child["compiled"])
                fingerprints[(kernel["name"], config, arch)] = Fingerprint(
                    kernel["name"], config, arch, launch, device, environment
                )
    benchmarks = {
        arch: [b for b in child["benchmarks"][arch] if name_matches(b["kernel"], kernels or ())] for arch in archs
    }
    _CACHE[key] = TreeFingerprints(fingerprints, benchmarks, child["compiled"])
    return _CACHE[key]


def launch_part(tree: Path, module: str) -> Part:
    try:
        files = launch_path.launch_path_files(tree, module)
    except launch_path.ModuleNotInTree as exc:
        return Part.unknown(UnknownReason.MODULE_NOT_FOUND, str(exc))
    except launch_path.SourceUnparsable as exc:
        return Part.unknown(UnknownReason.SOURCE_UNPARSABLE, str(exc))
    return Part(launch_path.combined_digest(files), files=files)


def device_part(kernel: Mapping[str, Any], arch: str, config: str, compiled: Mapping[str, Mapping[str, Any]]) -> Part:
    if arch == CPU_ARCH:
        return Part(NO_DEVICE_CODE)
    if kernel["backend"] == "torch":
        # Its device code is torch's kernels: fixed by the launch path and the torch version.
        return Part(TORCH_OPS)
    if arch not in kernel["compile_archs"]:
        return Part.unknown(UnknownReason.NO_COMPILE_PATH, f"{kernel['name']} compiles for {kernel['compile_archs']}")
    result = compiled.get(f"{kernel['name']}/{arch}/{config}")
    if result is None or not result["ok"]:
        return Part.unknown(UnknownReason.COMPILE_FAILED, (result or {}).get("error", "not compiled"))
    return Part(result["digest"])


class ChildFailed(HarnessError, RuntimeError):
    """The child loading the tree's registry died, timed out or wrote nothing; the message has its last lines."""


def _run_child(tree: Path, request: Mapping[str, Any], log: Callable[[str], None]) -> dict[str, Any]:
    try:
        with (
            kernels_of(tree) as (folder, env),
            tempfile.TemporaryDirectory(prefix=f"{MARKER}{os.getpid()}-fingerprint-") as tmp,
        ):
            request_path, result_path = Path(tmp, "request.json"), Path(tmp, "result.json")
            request_path.write_text(json.dumps(request))
            cmd = [sys.executable, "-m", "ci.common.device_code", str(request_path), str(result_path)]
            run = run_forwarding_stderr(cmd, cwd=folder, env=env, log=log, timeout_s=CHILD_TIMEOUT_S)
            if run.timed_out:
                raise ChildFailed(f"loading and compiling the kernels took over {CHILD_TIMEOUT_S} s")
            if run.returncode != 0 or not result_path.exists():
                raise ChildFailed(f"exit {run.returncode}: {run.tail(2)}")
            return json.loads(result_path.read_text())
    except ChildFailed:
        raise
    except Exception as exc:  # OSError, NotAKernelsTree and friends: the tree cannot be read
        raise ChildFailed(f"{type(exc).__name__}: {exc}") from None


def kernels_content_digest(tree: Path) -> str:
    """Exact bytes of every file under ``tree/kernels`` (the cache key: a changed byte recompiles)."""
    h = hashlib.sha256()
    root = Path(tree) / "kernels"
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


# The history's environment part


def environment_part(measuring_root: Path = REPO_ROOT) -> Part:
    """Measuring code (harness/, asv_bench/ normalized) and library/driver versions of this process."""
    fields = {"python": platform.python_version()}
    try:
        for folder in ("harness", "asv_bench"):
            files = {
                p.relative_to(measuring_root).as_posix(): launch_path.source_digest(p.read_text(), str(p))
                for p in sorted((Path(measuring_root) / folder).rglob("*.py"))
            }
            fields[folder] = launch_path.combined_digest(files)
        for module in ("torch", "triton", "flydsl"):
            try:
                fields[module] = __import__(module).__version__
            except ImportError:
                fields[module] = "not installed"
        import torch

        fields["cuda"] = str(torch.version.cuda)
        fields["hip"] = str(getattr(torch.version, "hip", None))
        fields["driver"] = _driver_version()
    except Exception as exc:  # an unreadable harness or version: measure
        return Part.unknown(UnknownReason.ENVIRONMENT, f"{type(exc).__name__}: {exc}")
    return Part(hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest(), files=fields)


def _driver_version() -> str:
    """The NVIDIA driver (nvidia-smi) or ROCm (/opt/rocm/.info/version) version, or "unknown"."""
    rocm = Path("/opt/rocm/.info/version")
    if rocm.is_file():
        return "rocm " + rocm.read_text().strip()
    try:
        query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        done = subprocess.run(query, capture_output=True, text=True, timeout=30)
        if done.returncode == 0 and done.stdout.strip():
            return "nvidia " + done.stdout.split()[0]
    except (OSError, subprocess.TimeoutExpired):
        pass
    return "unknown"


# Comparing


def compare_fingerprints(base: Fingerprint | None, head: Fingerprint | None) -> Comparison:
    """IDENTICAL when every part is known and equal; UNKNOWN when a part is unknown; else DIFFERS and what."""
    if base is None or head is None:
        return Comparison(Outcome.UNKNOWN, reason=UnknownReason.NOT_AT_BASE)
    for side, fingerprint in (("head", head), ("base", base)):
        for name, part in fingerprint.parts().items():
            if not part.known:
                return Comparison(Outcome.UNKNOWN, reason=part.reason, detail=f"{side} {name}: {part.detail}")

    def changed(old: Part, new: Part) -> str:
        return ", ".join(sorted(k for k in {*old.files, *new.files} if old.files.get(k) != new.files.get(k)))

    what: list[str] = []
    if base.launch_path.digest != head.launch_path.digest:
        what.append("launch path: " + changed(base.launch_path, head.launch_path))
    if base.device_code.digest != head.device_code.digest:
        what.append(f"{head.arch} code of {head.config}")
    if base.environment and head.environment and base.environment.digest != head.environment.digest:
        what.append("environment: " + changed(base.environment, head.environment))
    return Comparison(Outcome.DIFFERS, tuple(what)) if what else Comparison(Outcome.IDENTICAL)


def benchmark_id(benchmark: Mapping[str, Any]) -> str:
    """The speed gate's id (ci.speed.engine.rounds.Benchmark.id): ``kernel[config]/shape``."""
    return f"{benchmark['kernel']}[{benchmark['config']}]/{benchmark['shape']}"


def compare(base: TreeFingerprints, head: TreeFingerprints) -> dict[str, dict[str, Comparison]]:
    """``{arch: {benchmark id: Comparison}}`` for every benchmark the head has on each arch
    (the base's benchmarks when the head's registry could not be loaded: they are all "measure"),
    then the base's benchmarks the head no longer has: "removed at head", so a removal does not vanish."""
    out: dict[str, dict[str, Comparison]] = {}
    listed = base if head.failure and not base.failure else head
    side, failure = ("head", head.failure) if head.failure else ("base", base.failure)
    failed = Comparison(Outcome.UNKNOWN, reason=UnknownReason.REGISTRY_FAILED, detail=f"{side}: {failure}")
    for arch, benchmarks in listed.benchmarks.items():
        out[arch] = {}
        for bench in benchmarks:
            key = (bench["kernel"], bench["config"], arch)
            result = failed if failure else compare_fingerprints(base.fingerprints.get(key), head.fingerprints.get(key))
            out[arch][benchmark_id(bench)] = result
        if not failure:
            for bench in base.benchmarks.get(arch, []):
                out[arch].setdefault(benchmark_id(bench), Comparison(Outcome.REMOVED))
    return out
