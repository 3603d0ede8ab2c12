"""The work of ``python -m ci.budget.resources``: compile each target without a GPU, read it with harness.resources.

The budget gate reads this JSON from every commit's checkout: its layout (``SCHEMA``) is append-only.
"""

from __future__ import annotations

import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ci.budget.targets import describe_error
from ci.common.errors import WriteError
from ci.common.files import append_step_summary_or_fallback, write_json_atomic, write_text_atomic
from harness.report import markdown_table, text_table
from harness.resources import ResourceParseError, ResourceUsage, target_id, usage_from_artifact, usage_table

if TYPE_CHECKING:
    from ci.budget.options import ResourcesOptions

SCHEMA = "mxfp4-resources/1"
PROG = "python -m ci.budget.resources"  # the prefix of its lines, as the front's own error line
ISA_KEPT = "the assembly files written before it; no --json written (a full disk is not a compile failure)"


def inspect(kernel_name: str, arch: str, config: str, isa_dir: Path | None = None) -> ResourceUsage:
    """Compile one target without a GPU and read its resource usage (optionally keeping its assembly)."""
    from kernels.registry import get_kernel

    artifact = get_kernel(kernel_name).compile_only(arch, config)
    if (artifact.kernel, artifact.arch, artifact.config) != (kernel_name, arch, config):
        raise ValueError(
            f"{kernel_name}.compile_only({arch!r}, {config!r}) returned an artifact for "
            f"{target_id(artifact.kernel, artifact.arch, artifact.config)}"
        )
    if isa_dir is not None:  # a refused write is WriteError (exit 2 naming the file), never a failed compile
        suffix = ".s" if arch.startswith("gfx") else ".ptx"
        write_text_atomic(isa_dir / f"{kernel_name}.{arch}.{config}{suffix}", artifact.assembly, kept=ISA_KEPT)
        if artifact.extra.get("sass"):
            write_text_atomic(isa_dir / f"{kernel_name}.{arch}.{config}.sass", artifact.extra["sass"], kept=ISA_KEPT)
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
            results[name] = {"ok": True, "usage": usage.to_dict()}
            done = f"{usage.registers} regs, {time.perf_counter() - start:.1f} s"
        except WriteError:  # the disk, not the kernel: the run stops with one line (exit 2)
            raise
        except Exception as exc:  # a kernel that fails to compile is a result, not a crash
            unreadable = isinstance(exc, ResourceParseError)  # compiled, but its output is unreadable: a harness error
            results[name] = {"ok": False, "kind": "parse" if unreadable else "compile", "error": describe_error(exc)}
            failed = "UNREADABLE compiler output" if unreadable else f"FAILED after {time.perf_counter() - start:.1f} s"
            done = f"{failed}: {results[name]['error']}"
        print(f"    {done}", file=progress, flush=True)
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


def run(options: ResourcesOptions) -> int:
    """Compile the selected targets, print the table, write ``--json``; the exit code (0 / 1 failed to compile / 2)."""
    if options.list_only:
        print("\n".join(target_id(*t) for t in options.targets))
        return 0
    if not options.targets:
        print(f"{PROG}: no kernel in the registry can be compiled without a GPU", file=sys.stderr)
    results = dict(sorted(measure(options.targets, isa_dir=options.isa_dir).items()))
    rows: list[dict[str, str]] = []
    for name, result in results.items():
        if result["ok"]:
            rows.extend(usage_table([ResourceUsage.from_dict(result["usage"], name)]))
        else:
            rows.append({"target": name, "regs": "FAILED", "error": result["error"][:120]})
    print(text_table(rows))
    if options.isa_dir is not None:
        where = f"{options.isa_dir} ({len(list(options.isa_dir.glob('*')))} files there)"  # glob: [] for a missing dir
        print(f"{PROG}: assembly of {len(results)} target(s) written to {where}", file=sys.stderr)
    failed = sorted(name for name, result in results.items() if not result["ok"])
    unreadable = sorted(name for name, result in results.items() if result.get("kind") == "parse")
    if options.json:
        import kernels  # its source_root lets the budget gate check that a checkout measured its own kernels

        source_root = str(Path(kernels.__file__).resolve().parent.parent)
        report = {"schema": SCHEMA, "source_root": source_root, "environment": environment(), "targets": results}
        kept = "the file as it was before (or no file); the table is on stdout"
        write_json_atomic(options.json, report, kept=kept)  # refused: WriteError, the front's one line (exit 2)
        print(f"{PROG}: --json written to {options.json}", file=sys.stderr)
    summary = "### Kernel resources (compile-only)\n\n" + markdown_table(rows)
    append_step_summary_or_fallback(summary, lambda line: print(f"{PROG}: {line}", file=sys.stderr))
    if unreadable:
        print(f"{PROG}: error: cannot read the compiler output of {', '.join(unreadable)}", file=sys.stderr)
        return 2
    if failed:
        print(
            f"{PROG}: {len(failed)} of {len(results)} target(s) failed to compile: {', '.join(failed)}",
            file=sys.stderr,
        )
        return 1
    return 0
