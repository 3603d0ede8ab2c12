"""The per-kernel worst case of a gate run: for the closing notes and for CI logs.

Every accuracy gate -- the K sweep, the large shapes and the edge cases -- logs
a :class:`GateRun` into the session's ``gate_log`` fixture; this module turns
them into one line per kernel[config] and, with MXFP4_GATE_REPORT, a JSON file
that also breaks each kernel[config] down by data kind (``edge:<case>`` for
the edge tests).
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

from known_deviations import cpu_flags, machine_features
from operands import DEVICE, SEED

from harness.accuracy import AccuracyReport
from harness.report import write_json_atomic
from kernels import devices


class GateRun(NamedTuple):
    kernel: str
    config: str
    kind: str  # the data kind of a sweep ("randn", "edge_scales", ...) or "edge:<case>" for an edge test
    report: AccuracyReport
    # The tests/known_deviations.py entry this run is a strict xfail under, or None: its failure is
    # expected and counted apart, and kept out of the worst-case columns it would otherwise swamp.
    known_deviation: str | None = None


def _empty_row() -> dict:
    return {
        "runs": 0,
        "failed": 0,
        "known_deviation_runs": 0,
        "min_cosine": 1.0,
        "max_rel_err": 0.0,
        "max_elem_ratio": 0.0,
    }


def _add(row: dict, run: GateRun) -> None:
    row["runs"] += 1
    if run.known_deviation:
        row["known_deviation_runs"] += 1
        return
    report = run.report
    row["failed"] += not report.passed
    row["min_cosine"] = min(row["min_cosine"], report.cosine)
    row["max_rel_err"] = max(row["max_rel_err"], report.rel_err)
    row["max_elem_ratio"] = max(row["max_elem_ratio"], report.worst_element_ratio)


def summarize(runs: list[GateRun], config, json_path: str | None) -> None:
    worst: dict = defaultdict(_empty_row)
    by_kind: dict = defaultdict(lambda: defaultdict(_empty_row))
    for run in runs:
        key = f"{run.kernel}[{run.config}]"
        _add(worst[key], run)
        _add(by_kind[key][run.kind], run)
        if not run.report.passed and not run.known_deviation:
            by_kind[key][run.kind].setdefault("failures", []).append(run.report.summary())
    lines = [f"gate summary on {devices.gpu_name(DEVICE)} ({devices.device_arch(DEVICE)}), seed {SEED}:"]
    for key, row in sorted(worst.items()):
        edge_runs = sum(r["runs"] for kind, r in by_kind[key].items() if kind.startswith("edge:"))
        lines.append(
            f"  {key:45s} runs={row['runs']:3d} (edge {edge_runs}) failed={row['failed']} "
            f"known_dev={row['known_deviation_runs']} min_cos={row['min_cosine']:.9f} "
            f"max_rel_err={row['max_rel_err']:.3e} max_elem_ratio={row['max_elem_ratio']:.3f}"
        )
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("\n".join(lines))
    if json_path:
        payload = {
            "device": devices.gpu_name(DEVICE),
            "arch": devices.device_arch(DEVICE),
            "seed": SEED,
            # Which CPU kind this run got: the known deviations it is judged against depend on it.
            "cpu_flags": sorted(cpu_flags() & {"avx512f", "avx512_bf16", "amx_bf16"}),
            "machine_features": sorted(machine_features()),
            "kernels": worst,
            "by_kind": by_kind,
        }
        write_json_atomic(json_path, payload)
