"""The per-kernel worst case of a gate run: for the closing notes and for CI logs."""

from __future__ import annotations

from collections import defaultdict

from operands import DEVICE, SEED

from harness.report import write_json_atomic
from kernels import devices


def summarize(reports, config, json_path: str | None) -> None:
    worst: dict = defaultdict(lambda: {"runs": 0, "failed": 0, "min_cosine": 1.0, "max_rel_err": 0.0, "max_elem_ratio": 0.0})
    for name, kernel_config, _kind, report in reports:
        row = worst[f"{name}[{kernel_config}]"]
        row["runs"] += 1
        row["failed"] += not report.passed
        row["min_cosine"] = min(row["min_cosine"], report.cosine)
        row["max_rel_err"] = max(row["max_rel_err"], report.rel_err)
        row["max_elem_ratio"] = max(row["max_elem_ratio"], report.worst_element_ratio)
    lines = [f"gate summary on {devices.gpu_name(DEVICE)} ({devices.device_arch(DEVICE)}), seed {SEED}:"]
    for key, row in sorted(worst.items()):
        lines.append(
            f"  {key:45s} runs={row['runs']:3d} failed={row['failed']} min_cos={row['min_cosine']:.9f} "
            f"max_rel_err={row['max_rel_err']:.3e} max_elem_ratio={row['max_elem_ratio']:.3f}"
        )
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("\n".join(lines))
    if json_path:
        payload = {"device": devices.gpu_name(DEVICE), "arch": devices.device_arch(DEVICE), "seed": SEED, "kernels": worst}
        write_json_atomic(json_path, payload)
