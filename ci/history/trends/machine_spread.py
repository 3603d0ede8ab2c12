"""Machine-to-machine spread: two runners of one kind measured at the same commits, side by side (issue 20, item 4).

Why: docs/HISTORY.md, "trends/machine_spread.py".
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import numpy as np

from ci.history.asv_results import folder
from ci.history.asv_results.store import History
from ci.history.trends import regressions, views
from harness.report import markdown_table

NO_GPU = re.compile(r"^none\b")


def gpu_kind(results_dir: Path, machine: str) -> str | None:
    """The GPU model of an asv machine (its machine.json ``gpu`` without the device count), or None without a GPU."""
    gpu = (folder.machine_json(results_dir, machine) or {}).get("gpu")
    if not isinstance(gpu, str) or not gpu.strip() or NO_GPU.match(gpu):
        return None
    return re.sub(r"\s+x\d+$", "", gpu.strip())


def machines_by_kind(results_dir: Path) -> dict[str, list[str]]:
    """GPU model -> the asv machines of that model under ``results_dir`` (every kind, one machine or more)."""
    kinds: dict[str, list[str]] = {}
    for machine_dir in folder.machine_dirs(results_dir):
        kind = gpu_kind(results_dir, machine_dir.name)
        if kind is not None:
            kinds.setdefault(kind, []).append(machine_dir.name)
    return kinds


def spread(results_dir: Path, history: History, newest: int = regressions.HISTORY_COMMITS) -> list[dict[str, Any]]:
    """One row per (pair of machines of one kind, benchmark both measured at a common commit among the ``newest``
    commits of ``history``: how far apart they measure now)."""
    recent = views.newest(history, newest)
    rows = []
    for kind, machines in sorted(machines_by_kind(results_dir).items()):
        if len(machines) < 2:
            continue
        series = {m: regressions.series_of(recent, m) for m in machines}
        for first, second in itertools.combinations(machines, 2):
            for benchmark in sorted(set(series[first]) & set(series[second])):
                a, b = series[first][benchmark], series[second][benchmark]
                common = [c for c in a.commits if c in set(b.commits)]
                if not common:
                    continue
                level_a = float(np.median([a.medians()[a.commits.index(c)] for c in common]))
                level_b = float(np.median([b.medians()[b.commits.index(c)] for c in common]))
                rows.append(
                    {
                        "kind": kind,
                        "benchmark": benchmark,
                        "machines": [first, second],
                        "commits": len(common),
                        "tflops": [level_a, level_b],
                        "ratio": level_b / level_a,
                    }
                )
    return rows


def spread_markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The summary's table; nothing when no two machines of one kind share a measured commit."""
    if not rows:
        return []
    table = [
        {
            "benchmark": r["benchmark"],
            "GPU": r["kind"],
            "machine A": r["machines"][0],
            "A TFLOPS": f"{r['tflops'][0]:.4g}",
            "machine B": r["machines"][1],
            "B TFLOPS": f"{r['tflops'][1]:.4g}",
            "B / A": f"{r['ratio']:.4f}",
            "spread": f"{(r['ratio'] - 1) * 100:+.1f}%",
            "commits": str(r["commits"]),
        }
        for r in rows
    ]
    return [
        "### Machine-to-machine spread (one GPU model, the commits both measured; median TFLOPS)",
        "",
        "Change points and the drift guard compare each machine only with itself; this compares machines.",
        "",
        markdown_table(table),
    ]
