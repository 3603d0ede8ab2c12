"""A synthetic history's summaries made in memory: the checks and kernel pages at sizes too slow to write as
files (docs/data/history_scale.py --pages-only, tests/test_kernel_page_ranges.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import synthetic_history as synthetic

from asv_bench import records
from ci.history.asv_results import summaries as summaries_module


def summaries(spec: synthetic.Spec) -> tuple[list[str], dict[str, list[dict[str, Any]]]]:
    """(commits oldest first, machine -> the summaries ci.history.asv_results.store would keep) of
    :func:`make_history`'s history for a seed, made without git or files, under made-up hashes: the checks and kernel
    pages at sizes too slow to write (docs/data/history_scale.py --pages-only)."""
    rng, gpu, compile_files, lines, levels, drift, noise = synthetic._draw(spec)
    dates, _ = synthetic.commit_dates(spec)
    recs = gpu.sidecar["records"]
    missing = {
        key: records.describe(recs[key]) for i, key in enumerate(gpu.keys) if i not in gpu.measured and key in recs
    }
    devices = {i: (recs[gpu.keys[i]].get("gpu_before") or {}).get("name") or "GPU" for i in gpu.measured}
    clocks = {i: summaries_module._clocks(recs[gpu.keys[i]]) for i in gpu.measured}
    commits = [f"{i + 1:040x}" for i in range(spec.commits)]
    out: dict[str, list[dict[str, Any]]] = {spec.gpu_machine: [], synthetic.COMPILE_MACHINE: []}
    for index, commit in enumerate(commits):
        gemm = {}
        for i in gpu.measured:
            flagged = rng.random() < spec.flagged_share
            median = gpu.base_s[i] / (levels[i][index] * (1 + drift[index]) * (1 + noise[i][index]))
            drawn = median * (1 + rng.normal(0, spec.sample_noise, gpu.repeats[i]))
            flops, middle = recs[gpu.keys[i]]["flops"], float(np.median(drawn))
            q25, q75 = np.quantile(drawn, (0.25, 0.75))
            level, error = summaries_module._level(flops / drawn / 1e12)
            gemm[gpu.keys[i]] = [
                flops / middle / 1e12,
                middle,
                level,
                error,
                float((q75 - q25) / middle),
                devices[i],
                [records.FLAG_THROTTLED] if flagged else [],
                clocks[i],
                None,
            ]
        date_ms = int(dates[index]) * 1000
        out[spec.gpu_machine].append(
            {
                "commit": commit,
                "date": date_ms,
                "gemm": gemm,
                "missing": dict(missing),
                "resources": {},
                "fingerprints": {"of": {}, "originals": [], "at": 0.0},
            }
        )
        if compile_files is not None:
            compile_files.step(index)
            params = [(a, b) for a in compile_files.params[0] for b in compile_files.params[1]]
            resources = {
                f"{name}({a}, {b})": float(v)
                for name in compile_files.names
                for (a, b), v in zip(params, compile_files.base[name])
            }
            out[synthetic.COMPILE_MACHINE].append(
                {
                    "commit": commit,
                    "date": date_ms,
                    "gemm": {},
                    "missing": {},
                    "resources": resources,
                    "fingerprints": {"of": {}, "originals": [], "at": 0.0},
                }
            )
    return commits, out
