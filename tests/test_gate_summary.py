"""The gate summary and its JSON report count every kind of gate run: sweeps, edge cases, known deviations."""

from __future__ import annotations

import json
from types import SimpleNamespace

from gate_summary import GateRun, summarize

from harness.accuracy import AccuracyReport


def _report(rel_err: float) -> AccuracyReport:
    return AccuracyReport(
        shape=(256, 256, 8192),
        rel_err=rel_err,
        cosine=1.0 - rel_err**2 / 2,
        worst_element_ratio=rel_err / 2**-8,
        worst_element=(3, 5),
        nonfinite=0,
        missing_nan=0,
    )


class _Reporter:
    def __init__(self):
        self.lines: list[str] = []

    def write_line(self, text: str) -> None:
        self.lines.append(text)


def test_summary_covers_edge_runs_and_known_deviations(tmp_path):
    reporter = _Reporter()
    config = SimpleNamespace(pluginmanager=SimpleNamespace(get_plugin=lambda name: reporter))
    runs = [
        GateRun("torch_dequant", "bf16", "randn", _report(1.7e-3)),
        GateRun("torch_dequant", "bf16", "edge:extreme_scales", _report(0.225)),  # an edge failure
        GateRun("triton_dot_scaled", "m128", "edge:extreme_scales", _report(1.0), known_deviation="seen on an H200"),
    ]
    path = tmp_path / "gates.json"
    summarize(runs, config, str(path))
    report = json.loads(path.read_text())

    torch_row = report["kernels"]["torch_dequant[bf16]"]
    assert (torch_row["runs"], torch_row["failed"], torch_row["max_rel_err"]) == (2, 1, 0.225)
    edge = report["by_kind"]["torch_dequant[bf16]"]["edge:extreme_scales"]
    assert edge["failed"] == 1 and "rel_err=2.250e-01" in edge["failures"][0]
    # A known deviation is counted apart: not a failure, and kept out of the worst-case columns.
    triton_row = report["kernels"]["triton_dot_scaled[m128]"]
    assert (triton_row["runs"], triton_row["failed"], triton_row["known_deviation_runs"]) == (1, 0, 1)
    assert triton_row["max_rel_err"] == 0.0
    assert "machine_features" in report and "cpu_flags" in report
    text = "\n".join(reporter.lines)
    assert "torch_dequant[bf16]" in text and "(edge 1) failed=1" in text and "known_dev=1" in text
