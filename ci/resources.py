"""Compile every kernel the registry can build without a GPU and report its resources.

    python -m ci.resources                        # table of every compile target
    python -m ci.resources --kernel triton_dot_scaled --arch sm_90
    python -m ci.resources --json results/resources.json

A compile target is (kernel, arch, config) from ``kernels.resources.compile_targets()``.
For each: registers (total VGPRs on gfx950, registers per thread on sm_90), arch
VGPRs / AGPRs / SGPRs, spills and scratch, shared memory / LDS, occupancy, MFMA
count. Progress goes to stderr, the table to stdout, JSON (written atomically) to
``--json``. The budget gate (ci.budget_gate) runs this command inside a checkout
of each commit it compares, so the JSON layout (``SCHEMA``) is append-only.

Exit: 0 every target compiled; 1 a target failed to compile (its error is in the
table and the JSON); 2 harness error (unknown kernel/arch, registry import error,
compiler output the parser cannot read, unwritable output).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

SCHEMA = "mxfp4-resources/1"


def measure(targets: Sequence[tuple[str, str, str]], progress=sys.stderr) -> dict[str, dict[str, Any]]:
    """``{target_id: {"ok": True, "usage": {...}} | {"ok": False, "error": "..."}}`` for each target."""
    from kernels.resources import ResourceParseError, inspect, target_id

    results: dict[str, dict[str, Any]] = {}
    for index, (kernel, arch, config) in enumerate(targets, 1):
        name = target_id(kernel, arch, config)
        print(f"[{index}/{len(targets)}] compiling {name} ...", file=progress, flush=True)
        start = time.perf_counter()
        try:
            usage = inspect(kernel, arch, config)
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


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> None:
    """Write JSON to a temporary file beside ``path`` and rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, sort_keys=False, default=str)  # Paths and the like as text
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def results_table(results: Mapping[str, Mapping[str, Any]]) -> list[dict[str, str]]:
    from kernels.resources import ResourceUsage, usage_table

    rows = []
    for name, result in sorted(results.items()):
        if result["ok"]:
            rows.extend(usage_table([ResourceUsage.from_dict(result["usage"], name)]))
        else:
            rows.append({"target": name, "regs": "FAILED", "error": result["error"][:120]})
    return rows


def format_text_table(rows: Sequence[Mapping[str, str]]) -> str:
    if not rows:
        return "(no rows)"
    columns = list(dict.fromkeys(key for row in rows for key in row))
    widths = {c: max(len(c), *(len(row.get(c, "")) for row in rows)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns), "  ".join("-" * widths[c] for c in columns)]
    lines += ["  ".join(row.get(c, "").ljust(widths[c]) for c in columns).rstrip() for row in rows]
    return "\n".join(lines)


def format_markdown_table(rows: Sequence[Mapping[str, str]]) -> str:
    if not rows:
        return "_(no rows)_"
    columns = list(dict.fromkeys(key for row in rows for key in row))

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def append_step_summary(markdown: str) -> None:
    """Append to ``$GITHUB_STEP_SUMMARY`` when it is set (GitHub Actions' job summary)."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if path:
        with open(path, "a") as f:
            f.write(markdown.rstrip() + "\n\n")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ci.resources",
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
        from kernels.resources import compile_targets, target_id

        targets = [t for t in compile_targets(arch=args.arch) if args.kernel in (None, t[0]) and args.config in (None, t[2])]
    except Exception as exc:  # registry import error
        print(f"ci.resources: error: {describe_error(exc)}", file=sys.stderr)
        return 2
    if not targets and (args.kernel or args.arch or args.config) and not args.allow_empty:
        print(f"ci.resources: error: no compile target matches --kernel {args.kernel} --arch {args.arch} "
              f"--config {args.config}", file=sys.stderr)
        return 2
    if args.list:
        print("\n".join(target_id(*t) for t in targets))
        return 0
    if not targets:
        print("ci.resources: no kernel in the registry can be compiled without a GPU", file=sys.stderr)

    results = measure(targets)
    rows = results_table(results)
    print(format_text_table(rows))
    failed = sorted(name for name, result in results.items() if not result["ok"])
    unreadable = sorted(name for name, result in results.items() if result.get("kind") == "parse")
    if args.json:
        try:
            write_json_atomic(args.json, report(results))
        except OSError as exc:
            print(f"ci.resources: error: cannot write --json {args.json}: {exc}", file=sys.stderr)
            return 2
    append_step_summary("### Kernel resources (compile-only)\n\n" + format_markdown_table(rows))
    if unreadable:
        print(f"ci.resources: error: cannot read the compiler output of {', '.join(unreadable)}", file=sys.stderr)
        return 2
    if failed:
        print(f"ci.resources: {len(failed)} of {len(results)} target(s) failed to compile: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
