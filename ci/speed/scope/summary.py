"""What ci.speed.changes reports: the per-benchmark decision, the code diffs, the GPU seconds saved, all of it in
one data object (:func:`report_data`) that the Markdown is drawn from: the summary and the JSON cannot disagree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ci.common.code_fingerprint import Comparison, Outcome, TreeFingerprints, benchmark_id
from ci.common.errors import InputError
from ci.common.json_file import JsonFileError, read_json
from ci.speed.scope.dependencies import warning_lines
from harness.instruction_mix import instruction_mix, mix_diff
from harness.report import markdown_table

SCHEMA = "mxfp4-changes/1"


class ChangesFileError(InputError, ValueError):
    """A --changes file that cannot be used: unreadable, another schema, other commits, or without the arch."""


def load_changes(path: Path) -> dict[str, Any]:
    try:
        data = read_json(path, f"--changes {path}")
    except JsonFileError as exc:
        raise ChangesFileError(str(exc)) from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ChangesFileError(f"--changes {path}: not a {SCHEMA} file (python -m ci.speed.changes --json)")
    if data.get("error"):
        raise ChangesFileError(f"--changes {path}: the CPU job failed: {data['error']}")
    return data


# The step output the PR workflow's GPU job reads (`needs.<job>.outputs.gpu_needed`): tests/test_workflows.py
# checks that the workflow's `if:` names exactly this.
GPU_NEEDED_OUTPUT = "gpu_needed"
# Estimated GPU seconds per benchmark with the warm-worker engine when no earlier
# gate run gives its cost: 8192^3 ~ 10 s, 16384^3 ~ 15 s; other sizes by FLOPs,
# +5 s per 8x the work (log scale), never below 10 s.
_REFERENCE_FLOPS = 8192**3
_REFERENCE_SECONDS = 10.0
_SECONDS_PER_8X = 5.0
RESOURCE_FIELDS = (
    "registers",
    "arch_vgpr",
    "agpr",
    "sgpr",
    "vgpr_spills",
    "spill_store_bytes",
    "scratch_bytes",
    "shared_bytes",
    "occupancy",
    "mma_count",
    "accvgpr_copies",
    "accvgpr_copies_in_loop",
)


def estimated_cost_s(m: int, n: int, k: int) -> float:
    return max(_REFERENCE_SECONDS, _REFERENCE_SECONDS + _SECONDS_PER_8X * math.log(m * n * k / _REFERENCE_FLOPS, 8))


def load_costs(path: Path) -> dict[str, float]:
    """``{benchmark id: GPU seconds}`` from a previous gate run: a flat map or one under ``"costs"``."""
    try:
        data = read_json(path, f"--costs {path}")
    except JsonFileError as exc:
        raise ValueError(str(exc)) from None
    costs = data.get("costs", data) if isinstance(data, dict) else None
    if not isinstance(costs, dict) or not all(isinstance(v, (int, float)) for v in costs.values()):
        raise ValueError(f'--costs {path}: expected {{benchmark id: seconds}} (optionally under "costs")')
    return {str(k): float(v) for k, v in costs.items()}


def github_output_text(data: Mapping[str, Any]) -> str:
    """The $GITHUB_OUTPUT lines of a decision: ``gpu_needed=true|false`` (true when the data has no decision)."""
    return f"{GPU_NEEDED_OUTPUT}={'false' if data.get('gpu_needed') is False else 'true'}\n"


def append_github_output(data: Mapping[str, Any], path: Path) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(github_output_text(data))


def report_data(
    base_sha: str | None,
    head_sha: str,
    base: TreeFingerprints,
    head: TreeFingerprints,
    comparisons: Mapping[str, Mapping[str, Comparison]],
    costs: Mapping[str, float] | None,
) -> dict[str, Any]:
    benchmarks = {
        (arch, f"{b['kernel']}[{b['config']}]/{b['shape']}"): b
        for side in (head, base)
        for arch, listed in side.benchmarks.items()
        for b in listed
    }
    by_arch: dict[str, dict[str, Any]] = {}
    to_measure: set[str] = set()
    unchanged: set[str] = set()
    removed: dict[str, list[dict[str, Any]]] = {}
    saved: dict[str, float] = {}
    for arch, results in comparisons.items():
        by_arch[arch] = {bench_id: _comparison_json(c) for bench_id, c in sorted(results.items())}
        removed[arch] = [benchmarks[(arch, i)] for i, c in sorted(results.items()) if c.outcome is Outcome.REMOVED]
        for bench_id, c in results.items():
            if c.outcome is Outcome.REMOVED:
                continue
            if c.outcome is Outcome.IDENTICAL:
                unchanged.add(bench_id)
                b = benchmarks[(arch, bench_id)]
                cost = (costs or {}).get(bench_id, estimated_cost_s(b["m"], b["n"], b["k"]))
                saved[arch] = saved.get(arch, 0.0) + cost
            else:
                to_measure.add(bench_id)
    nothing_listed = not any(comparisons.values())
    return {
        "schema": SCHEMA,
        "base": base_sha,
        "head": head_sha,
        "archs": list(comparisons),
        # A side whose registry could not be read lists nothing: the GPU job must run then.
        "gpu_needed": bool(to_measure) or nothing_listed,
        "gpu_needed_by_arch": {
            arch: any(c.outcome not in (Outcome.IDENTICAL, Outcome.REMOVED) for c in results.values())
            for arch, results in comparisons.items()
        },
        "to_measure": sorted(to_measure),
        "unchanged": sorted(unchanged - to_measure),
        # Base-only benchmarks: nothing to measure, but the summary and the gate list them.
        "removed": sorted({benchmark_id(b) for listed in removed.values() for b in listed} - to_measure - unchanged),
        "removed_by_arch": removed,
        "by_arch": by_arch,
        "failures": {side: t.failure for side, t in (("base", base), ("head", head)) if t.failure},
        "saved": {
            "gpu_seconds_by_arch": {a: round(s, 1) for a, s in saved.items()},
            "estimated": costs is None,
            "benchmarks_skipped": len(unchanged - to_measure),
        },
        "code_changes": code_changes(base, head),
        # What the speed gate needs to list the skipped benchmarks and check selectors without a survey.
        "benchmarks_by_arch": {
            arch: (head if arch in head.benchmarks and not head.failure else base).benchmarks.get(arch, [])
            for arch in comparisons
        },
        "registered": registered(head if not head.failure else base),
    }


def registered(tree: TreeFingerprints) -> list[dict[str, Any]]:
    """``[{name, configs}]`` of a tree's fingerprinted kernels (as a survey's "registered")."""
    configs: dict[str, list[str]] = {}
    for kernel, config, _arch in tree.fingerprints:
        if config not in configs.setdefault(kernel, []):
            configs[kernel].append(config)
    return [{"name": name, "configs": cs} for name, cs in sorted(configs.items())]


def _comparison_json(c: Comparison) -> dict[str, Any]:
    return {
        "outcome": c.outcome.name,
        "summary": c.describe(),
        "what": list(c.what),
        "reason": c.reason.name if c.reason else None,
        "detail": c.detail,
    }


def code_changes(base: TreeFingerprints, head: TreeFingerprints) -> list[dict[str, Any]]:
    """For each compile target whose code differs: instruction mix and resources, base vs head."""
    out = []
    for target, new in sorted(head.compiled.items()):
        old = base.compiled.get(target)
        if not (old and old["ok"] and new["ok"]) or old["digest"] == new["digest"]:
            continue
        rows = mix_diff(
            instruction_mix(old["mix_kind"], old["mix_text"]), instruction_mix(new["mix_kind"], new["mix_text"])
        )
        out.append(
            {
                "target": target,
                "dialect": new["mix_kind"],
                "instruction_mix": rows,
                "resources": resource_diff(old["usage"], new["usage"]),
            }
        )
    return out


def resource_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, str]]:
    rows = []
    for name in RESOURCE_FIELDS:
        a, b = old.get(name), new.get(name)
        if a is None and b is None:
            continue
        delta = f"{b - a:+d}" if isinstance(a, int) and isinstance(b, int) and a != b else ("" if a == b else "changed")
        rows.append({"resource": name, "base": str(a), "head": str(b), "delta": delta})
    return rows


def markdown(data: Mapping[str, Any]) -> str:
    lines = [f"### Code changes: {str(data['base'])[:12]} -> {data['head'][:12]}", ""]
    for side, failure in data["failures"].items():
        lines.append(f"- **{side} kernels could not be read**: {failure}")
    lines += warning_lines(data.get("dependency_changes") or [])
    need = "yes" if data["gpu_needed"] else "no"
    saved = data["saved"]
    seconds = ", ".join(f"{arch} {s:.0f} s" for arch, s in saved["gpu_seconds_by_arch"].items()) or "0 s"
    removed = f", {len(data['removed'])} removed at head" if data.get("removed") else ""
    lines += [
        f"GPU needed: **{need}** ({len(data['to_measure'])} to measure, {saved['benchmarks_skipped']} "
        f"unchanged{removed}). GPU time saved by the skips: {seconds}"
        f"{' (estimated)' if saved['estimated'] else ''}.",
        "",
    ]
    for arch, results in data["by_arch"].items():
        rows = [{"benchmark": bench_id, "decision": r["summary"]} for bench_id, r in results.items()]
        lines += [f"#### {arch}", "", markdown_table(rows, empty="_(no benchmark runs on this arch)_"), ""]
    lines += code_changes_lines(data["code_changes"])
    return "\n".join(lines)


def code_changes_lines(changes: Any) -> list[str]:
    """Per compiled code that changed: its instruction mix and resources, base vs head (Markdown lines)."""
    lines: list[str] = []
    for change in changes:
        lines += [
            f"#### {change['target']}: instruction mix ({change['dialect']}, static counts)",
            "",
            markdown_table(change["instruction_mix"]),
            "",
            "Resources:",
            "",
            markdown_table(change["resources"]),
            "",
        ]
    return lines
