"""Compile every kernel the registry can build without a GPU and report its resources.

    python -m ci.budget.resources                        # table of every compile target
    python -m ci.budget.resources --kernel triton_dot_scaled --arch sm_90
    python -m ci.budget.resources --json results/resources.json
    python -m ci.budget.resources --kernel flydsl_gfx950_4wave --isa-dir out/   # also keep each ISA/PTX

A compile target is (kernel, arch, config): every config of every registered
kernel, for each arch its ``compile_archs`` lists. The kernel compiles itself
(``Kernel.compile_only``: the code under test); harness.resources reads the
compiler's output (the one parser and resource model, also used by the asv
resource history and the budget gate).
For each: registers (total VGPRs on gfx950, registers per thread on sm_90), arch
VGPRs / AGPRs / SGPRs, spills and scratch, shared memory / LDS, occupancy, MFMA
count. Progress goes to stderr, the table to stdout, JSON (written atomically) to
``--json``. The budget gate (ci.budget.gate) runs this command inside a checkout
of each commit it compares, so the JSON layout (``SCHEMA``) is append-only.

Exit: 0 every target compiled; 1 a target failed to compile (its error is in the
table and the JSON); 2 harness error (unknown kernel/arch, registry import error,
compiler output the parser cannot read, unwritable output).
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from harness.report import append_step_summary, check_writable, markdown_table, text_table, write_json_atomic, write_text_atomic
from harness.resources import ResourceParseError, ResourceUsage, target_id, usage_from_artifact, usage_table

SCHEMA = "mxfp4-resources/1"


def compile_targets(arch: str | None = None) -> list[tuple[str, str, str]]:
    """Every (kernel, arch, config) the registry says ``compile_only`` can build here, sorted."""
    from kernels.registry import all_kernels

    return sorted(
        (k.name, a, config) for k in all_kernels() for a in k.compile_archs if arch in (None, a) for config in k.configs
    )


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
            print(f"    FAILED after {time.perf_counter() - start:.1f} s: {results[name]['error']}", file=progress, flush=True)
            continue
        results[name] = {"ok": True, "usage": usage.to_dict()}
        print(f"    {usage.registers} regs, {time.perf_counter() - start:.1f} s", file=progress, flush=True)
    return results


def describe_error(exc: BaseException) -> str:
    """One readable line: the outermost error and, when different, the root cause it wraps."""
    chain = [exc]
    while chain[-1].__cause__ is not None or chain[-1].__context__ is not None:
        chain.append(chain[-1].__cause__ or chain[-1].__context__)
        if len(chain) > 20:
            break

    def line(e: BaseException) -> str:
        text = " ".join(str(e).split())
        return f"{type(e).__name__}: {text[:600]}"

    outer, root = line(chain[0]), line(chain[-1])
    return outer if len(chain) == 1 else f"{outer.split(' at ')[0][:200]} ... caused by {root}"


def environment() -> dict[str, str]:
    """Compiler versions: a register count is a property of (code, compiler)."""
    env = {"python": platform.python_version()}
    for module in ("triton", "flydsl", "torch"):
        try:
            env[module] = __import__(module).__version__
        except Exception as exc:  # an absent compiler is reported, not fatal
            env[module] = f"unavailable ({type(exc).__name__})"
    return env


def report(results: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    import kernels

    # source_root lets the budget gate check that a checkout measured its own kernels.
    source_root = str(Path(kernels.__file__).resolve().parent.parent)
    return {
        "schema": SCHEMA,
        "source_root": source_root,
        "environment": environment(),
        "targets": dict(sorted(results.items())),
    }


def results_table(results: Mapping[str, Mapping[str, Any]]) -> list[dict[str, str]]:
    rows = []
    for name, result in sorted(results.items()):
        if result["ok"]:
            rows.extend(usage_table([ResourceUsage.from_dict(result["usage"], name)]))
        else:
            rows.append({"target": name, "regs": "FAILED", "error": result["error"][:120]})
    return rows


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ci.budget.resources",
        description=(
            "Compile every (kernel, arch, config) the kernel registry can build without a GPU "
            "(Triton for sm_90/gfx950, FlyDSL for gfx950) and report registers, spills/scratch, "
            "shared memory/LDS, occupancy and MFMA count."
        ),
        epilog="Exit codes: 0 all compiled, 1 some target failed to compile, 2 harness error.",
    )
    parser.add_argument("--kernel", help="only this registered kernel name")
    parser.add_argument("--arch", help="only this architecture (e.g. gfx950, sm_90)")
    parser.add_argument("--config", help="only this config name")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON (atomically)")
    parser.add_argument("--isa-dir", metavar="DIR", type=Path, help="also keep each target's assembly (ISA / PTX / SASS) here")
    parser.add_argument("--list", action="store_true", help="list the compile targets and exit without compiling")
    parser.add_argument(
        "--allow-empty",
        action="store_true",
        help="no target matching --kernel/--arch/--config is not an error (the budget gate measures old commits with it)",
    )
    return parser


def main(argv: Iterable[str] | None = None) -> int:
    args = _parser().parse_args(None if argv is None else list(argv))
    try:
        targets = [t for t in compile_targets(arch=args.arch) if args.kernel in (None, t[0]) and args.config in (None, t[2])]
    except Exception as exc:  # registry import error
        print(f"ci.budget.resources: error: {describe_error(exc)}", file=sys.stderr)
        return 2
    if not targets and (args.kernel or args.arch or args.config) and not args.allow_empty:
        print(f"ci.budget.resources: error: no compile target matches --kernel {args.kernel} --arch {args.arch} "
              f"--config {args.config}", file=sys.stderr)
        return 2
    if args.list:
        print("\n".join(target_id(*t) for t in targets))
        return 0
    if not targets:
        print("ci.budget.resources: no kernel in the registry can be compiled without a GPU", file=sys.stderr)
    try:  # before minutes of compiling, not after
        if args.json:
            check_writable(args.json, "--json")
        if args.isa_dir:
            check_writable(args.isa_dir / ".probe", "--isa-dir")
    except OSError as exc:
        print(f"ci.budget.resources: error: {exc}", file=sys.stderr)
        return 2

    results = measure(targets, isa_dir=args.isa_dir)
    rows = results_table(results)
    print(text_table(rows))
    failed = sorted(name for name, result in results.items() if not result["ok"])
    unreadable = sorted(name for name, result in results.items() if result.get("kind") == "parse")
    if args.json:
        try:
            write_json_atomic(args.json, report(results))
        except OSError as exc:
            print(f"ci.budget.resources: error: cannot write --json {args.json}: {exc}", file=sys.stderr)
            return 2
    append_step_summary("### Kernel resources (compile-only)\n\n" + markdown_table(rows))
    if unreadable:
        print(f"ci.budget.resources: error: cannot read the compiler output of {', '.join(unreadable)}", file=sys.stderr)
        return 2
    if failed:
        print(f"ci.budget.resources: {len(failed)} of {len(results)} target(s) failed to compile: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
