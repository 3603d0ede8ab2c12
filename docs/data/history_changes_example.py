"""Make tests/data/history_changes.json: the site build's ``changes.json``, from made-up series.

    PYTHONPATH=. .venv/bin/python docs/data/history_changes_example.py tests/data/history_changes.json

The shape is the one history.yml's site-build job uploads as the ``history-changes`` artifact
(schema ``mxfp4-history-changes/1``, python -m ci.history.publish --json); the change points and
drift entries are computed by the real ci.history.trends.regressions (harness.changepoints, the drift guard) over TFLOPS
series drawn here with a fixed seed, one machine, 40 commits, 5 samples a commit at 1% noise:

- a 10% step down at commit 25 that stays (a regression change point, not recovered);
- a 10% step down at commit 10 and back up at commit 25 (a regression, then an improvement:
  recovered);
- a 0.6% loss per commit over the last 10 commits (the drift guard fires);
- a flat series (nothing).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from ci.history.trends.regressions import DRIFT_MIN_COMMITS, HISTORY_COMMITS, Series, change_points, drift
from harness.changepoints import levels_of

MACHINE = "mi355x-gpu0"
COMMITS = [hashlib.sha1(f"commit {i}".encode()).hexdigest() for i in range(40)]


def key(config: str) -> str:
    kernel, cfg = config.split(":")
    return f"bench_gemm.GemmOnGpu.track_time('{kernel}:{cfg}', 'square_m08192_n08192_k08192')"


def levels(kind: str) -> np.ndarray:
    x = np.ones(len(COMMITS)) * 2000.0
    if kind == "step":
        x[25:] *= 0.90
    elif kind == "blip":
        x[10:25] *= 0.90
    elif kind == "drift":
        x[30:] *= np.cumprod(np.full(10, 0.994))
    return x


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else Path("tests/data/history_changes.json")
    rng = np.random.default_rng(30)
    series = {
        key("flydsl_gfx950_4wave:default"): "step",
        key("triton_dot_scaled:m128_n128_k128_w8_s3"): "blip",
        key("flydsl_gfx950_4wave:intrinsic_acc"): "drift",
        key("torch_dequant:bf16"): "flat",
    }
    points, drifts = [], []
    for benchmark, kind in series.items():
        samples = [level * (1 + 0.01 * rng.standard_normal(5)) for level in levels(kind)]
        s = Series(MACHINE, benchmark, list(COMMITS), *levels_of(samples))
        newest = set(COMMITS[-HISTORY_COMMITS:])
        points += [{**c.to_json(), "recent": c.first_after in newest} for c in change_points(s)[0]]
        d = drift(s) if len(s.commits) >= DRIFT_MIN_COMMITS else None
        if d is not None:
            drifts.append(d.to_json())
    data = {
        "schema": "mxfp4-history-changes/1",
        "results_commit": hashlib.sha1(b"asv-results tip").hexdigest(),
        "site_url": "https://owner.github.io/repo/",
        "machines": [
            {
                "machine": MACHINE,
                "commits": len(COMMITS),
                "benchmarks": len(series),
                "not_checked": None,
                "change_points": points,
                "drift": drifts,
                "drift_failed": [d["benchmark"] for d in drifts if d["failed"]],
            },
            {
                "machine": "compile-only",
                "commits": len(COMMITS),
                "benchmarks": 0,
                "not_checked": "compile-only counts have no timings",
                "change_points": [],
                "drift": [],
                "drift_failed": [],
            },
        ],
    }
    out.write_text(json.dumps(data, indent=1) + "\n")
    for p in points:
        print(
            p["benchmark"],
            p["change"]["direction"],
            round(p["change"]["relative_change"], 4),
            p["change"]["index"],
            file=sys.stderr,
        )
    for d in drifts:
        print(d["benchmark"], "drift", round(d["drop"], 4), d["failed"], file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
