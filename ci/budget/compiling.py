"""Compile-only resource measurement: every target the registry can build without a GPU, read by harness.resources.

The work behind ``python -m ci.budget.resources`` (its front, which owns the options). The budget gate reads the JSON
this writes from a child run in each commit's checkout, so the layout (``SCHEMA``) is append-only.
"""

from __future__ import annotations

import platform
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ci.budget.targets import describe_error
from harness.report import append_step_summary, markdown_table, text_table, write_json_atomic, write_text_atomic
from harness.resources import ResourceParseError, ResourceUsage, target_id, usage_from_artifact, usage_table

if TYPE_CHECKING:
    from ci.budget.options import ResourcesOptions

SCHEMA = "mxfp4-resources/1"


def inspect(kernel_name: str, arch: str, config: str, isa_dir: Path | None = None) -> ResourceUsage:
    """Compile one target without a GPU and read its resource usage (optionally keeping its assembly)."""
    from kernels.registry import get_kernel

    artifact = get_kernel(kernel_name).compile_only(arch, config)
    if (artifact.kernel, artifact.arch, artifact.config) != (kernel_name, arch, config):
        raise ValueError(
            f"{kernel_name}.compile_only({arch!r}, {config!r}) returned an artifact for "
            f"{target_id(artifact.kernel, artifact.arch, artifact.config)}"
        )
    if isa_dir is not None:
        suffix = ".s" if arch.startswith("gfx") else ".ptx"
        write_text_atomic(isa_dir / f"{kernel_name}.{arch}.{config}{suffix}", artifact.assembly)
        if artifact.extra.get("sass"):
            write_text_atomic(isa_dir / f"{kernel_name}.{arch}.{config}.sass", artifact.extra["sass"])
    return usage_from_artifact(artifact)


def measure(
    targets: Sequence[tuple[str, str, str]], progress=sys.stderr, isa_dir: Path | None = None
) -> dict[str, dict[str, Any]]:
    """``{target_id: {"ok": True, "usage": {...}} | {"ok": False, "error": "..."}}`` for each target."""
    results: dict[str, dict[str, Any]] = {}
    for index, (kernel, arch, config) in enumerate(targets, 1):
        name = target_id(kernel, arch, config)
        print(f"[{index}/{len(targets)}] compiling {name} ...", file=progress, flush=True)
        start = time.perf_counter()
        try:
            usage = inspect(kernel, arch, config, isa_dir)
        except ResourceParseError as exc:  # compiled, but its output is unreadable: a harness error
            results[name] = {"ok": False, "kind": "parse", "error": describe_error(exc)}
            print(f"    UNREADABLE compiler output: {results[name]['error']}", file=progress, flush=True)
            continue
        except Exception as exc:  # a kernel that fails to compile is a result, not a crash
            results[name] = {"ok": False, "kind": "compile", "error": describe_error(exc)}
            seconds = time.perf_counter() - start
            print(f"    FAILED after {seconds:.1f} s: {results[name]['error']}", file=progress, flush=True)
            continue
        results[name] = {"ok": True, "usage": usage.to_dict()}
        print(f"    {usage.registers} regs, {time.perf_counter() - start:.1f} s", file=progress, flush=True)
    return results


def environment() -> dict[str, str]:
    """Compiler versions: a register count is a property of (code, compiler)."""
    env = {"python": platform.python_version()}
    for module in ("triton", "flydsl", "torch"):
        try:
            env[module] = __import__(module).__version__
        except Exception as exc:  # an absent compiler is reported, not fatal
            env[module] = f"unavailable ({type(exc).__name__})"
    return env


def resources_report(results: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    import kernels

    # source_root lets the budget gate check that a checkout measured its own kernels.
    source_root = str(Path(kernels.__file__).resolve().parent.parent)
    targets = dict(sorted(results.items()))
    return {"schema": SCHEMA, "source_root": source_root, "environment": environment(), "targets": targets}


def results_table(results: Mapping[str, Mapping[str, Any]]) -> list[dict[str, str]]:
    rows = []
    for name, result in sorted(results.items()):
        if result["ok"]:
            rows.extend(usage_table([ResourceUsage.from_dict(result["usage"], name)]))
        else:
            rows.append({"target": name, "regs": "FAILED", "error": result["error"][:120]})
    return rows


def run(options: ResourcesOptions) -> int:
    """Compile the selected targets, print the table, write ``--json``; the exit code (0 / 1 failed to compile / 2)."""
    if options.list_only:
        print("\n".join(target_id(*t) for t in options.targets))
        return 0
    if not options.targets:
        print("ci.budget.resources: no kernel in the registry can be compiled without a GPU", file=sys.stderr)
    results = measure(options.targets, isa_dir=options.isa_dir)
    rows = results_table(results)
    print(text_table(rows))
    if options.isa_dir is not None:
        kept = sorted(p.name for p in Path(options.isa_dir).glob("*")) if Path(options.isa_dir).is_dir() else []
        where = f"{options.isa_dir} ({len(kept)} files there)"
        print(f"ci.budget.resources: assembly of {len(results)} target(s) written to {where}", file=sys.stderr)
    failed = sorted(name for name, result in results.items() if not result["ok"])
    unreadable = sorted(name for name, result in results.items() if result.get("kind") == "parse")
    if options.json:
        try:
            write_json_atomic(options.json, resources_report(results))
            print(f"ci.budget.resources: --json written to {options.json}", file=sys.stderr)
        except OSError as exc:
            print(f"ci.budget.resources: error: cannot write --json {options.json}: {exc}", file=sys.stderr)
            return 2
    append_step_summary("### Kernel resources (compile-only)\n\n" + markdown_table(rows))
    if unreadable:
        print(
            f"ci.budget.resources: error: cannot read the compiler output of {', '.join(unreadable)}", file=sys.stderr
        )
        return 2
    if failed:
        print(
            f"ci.budget.resources: {len(failed)} of {len(results)} target(s) failed to compile: {', '.join(failed)}",
            file=sys.stderr,
        )
        return 1
    return 0
