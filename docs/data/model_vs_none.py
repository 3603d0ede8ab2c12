"""Every recorded gate run, replayed under today's plan with its runner's noise model and without one (issue 46).

    PYTHONPATH=. nice .venv/bin/python docs/data/model_vs_none.py --out docs/data/model_vs_none.json

Each gate record (schema mxfp4-speed-gate/1) under docs/data is replayed twice as the trusted judge does
(``python -m ci.speed --replay RECORD --judge``: this checkout's plan and thresholds, the record's rounds only):
with the noise model of the record's GPU (``--noise``: the H200's committed one; for an H100 record its own lease's
calibration, the first lease's where that lease wrote none) and with
``--plan noise=off``. Per benchmark: the usable rounds each
decision took, or "not decided" when the record ran out first (a recorded run stops once its own plan decided, so
many benchmarks have fewer rounds than today's plan may want). Counted: benchmarks whose decision with the model took
more rounds than without it (the rule says never: the generations' own test is the same at every look, the model
only adds a candidate), those decided only with the model, only without, and both.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

from ci.common.json_file import JsonFileError, read_json
from ci.speed.gate import main as gate

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
# The runner's model by the record's GPU: the H200's committed one; the H100's from its first calibration (a runner no
# profile names: docs/data/gpu_day_one_h100, its day one).
MODELS = {
    "H200": ROOT / "ci" / "speed_noise_h200.json",
    "H100": HERE / "gpu_day_one_h100" / "calibrate" / "model.json",
}
THRESHOLDS = ROOT / "ci" / "speed_thresholds_h200.json"


def records() -> list[Path]:
    found = []
    for path in sorted([*HERE.rglob("*.json"), *HERE.rglob("*.json.gz")]):
        try:
            data = read_json(path)  # plain or gzipped (the later leases' records are kept as NAME.json.gz)
        except JsonFileError:
            continue
        if isinstance(data, dict) and data.get("schema") == "mxfp4-speed-gate/1" and data.get("rounds"):
            found.append(path)
    return found


def model_for(path: Path, gpu: str) -> Path:
    """An H100 record's own lease's calibration where that lease wrote one (docs/data/gpu_day_one_h100*/calibrate:
    each H100 lease is a new runner's first day), else the GPU's model above."""
    lease = HERE / path.relative_to(HERE).parts[0] / "calibrate" / "model.json"
    return lease if gpu == "H100" and lease.exists() else MODELS[gpu]


def gpu_of(data: dict) -> str | None:
    name = str((data.get("environment") or {}).get("gpu") or data.get("device") or "")
    return next((key for key in MODELS if key in name), None)


def replay(path: Path, *extra: str) -> dict[str, dict] | None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        argv = ["--replay", str(path), "--judge", "--thresholds", str(THRESHOLDS), "--json", str(out), *extra]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            gate(argv)
        if not out.exists():
            return None
        data = json.loads(out.read_text())
    return {b["id"]: b for b in data.get("benchmarks", []) if b.get("status") == "gated"}


def decided(bench: dict) -> int | None:
    d = bench.get("decision") or {}
    if bench.get("verdict") in (None, "inconclusive") or not d.get("complete"):
        return None
    return int(d["rounds_used"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    t0 = time.process_time()
    rows, totals = [], {"both": 0, "slower_with_model": 0, "faster_with_model": 0, "model_only": 0, "none_only": 0}
    by_gpu = {gpu: dict.fromkeys(totals, 0) for gpu in MODELS}
    for path in records():
        data = read_json(path)
        gpu = gpu_of(data)
        if gpu is None or not model_for(path, gpu).exists():
            continue
        with_model = replay(path, "--noise", str(model_for(path, gpu)))
        without = replay(path, "--plan", "noise=off")
        if with_model is None or without is None:
            rows.append({"record": str(path.relative_to(ROOT)), "error": "replay wrote no record"})
            continue
        for bench_id, bench in with_model.items():
            a, b = decided(bench), decided(without.get(bench_id, {}))
            key = "both" if a and b else "model_only" if a else "none_only" if b else None
            for counts in (totals, by_gpu[gpu]):
                if key:
                    counts[key] += 1
                if a and b:
                    counts["slower_with_model"] += a > b
                    counts["faster_with_model"] += a < b
            rows.append(
                {
                    "record": str(path.relative_to(ROOT)),
                    "gpu": gpu,
                    "benchmark": bench_id,
                    "with_model": {"verdict": bench.get("verdict"), "rounds": a},
                    "without": {"verdict": without.get(bench_id, {}).get("verdict"), "rounds": b},
                }
            )
    result = {
        "command": "docs/data/model_vs_none.py " + " ".join(sys.argv[1:]),
        "totals": totals,
        "by_gpu": by_gpu,
        "records": len({r["record"] for r in rows}),
        "cpu_s": time.process_time() - t0,
        "rows": rows,
    }
    if args.out:
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=1) + "\n")
        tmp.replace(args.out)
    print(json.dumps({k: result[k] for k in ("totals", "by_gpu", "records", "cpu_s")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
