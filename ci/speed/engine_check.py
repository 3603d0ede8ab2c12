"""The warm engine beside the fresh one on this machine's GPU: an A/A check of ci.speed.warm.

    python -m ci.speed.engine_check OUT.json [ROUNDS]

Both sides are this checkout's kernels (an A/A pair), two benchmarks at 8192^3 (the
tracked Triton config and torch_dequant[bf16]): ROUNDS warm rounds (workers restarted
every ci.speed.warm.DEFAULT_RESTART_EVERY rounds), then two fresh rounds. Prints per
round the head/base ratios, the idle checks and the seconds, then the per-benchmark SD
of the log ratio and both engines' cost (start-up vs measuring); OUT.json keeps every record.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any, Sequence

from ci.common.commit_tree import REPO_ROOT
from ci.speed.cost import cost_summary
from ci.speed.rounds import Benchmark, FreshEngine, Side, rotating_order
from ci.speed.warm import WarmEngine

BENCHMARKS = (Benchmark("triton_dot_scaled", "m128_n256_k64_w8_s3", "8192x8192x8192", 8192, 8192, 8192),
              Benchmark("torch_dequant", "bf16", "8192x8192x8192", 8192, 8192, 8192))


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def log_ratios(rounds: Sequence[dict[str, Any]], bench_id: str) -> list[float]:
    ratios = []
    for rnd in rounds:
        recs = {p["side"]: p["records"].get(bench_id, {}) for p in rnd["processes"]}
        if all("tflops" in r for r in recs.values()):
            ratios.append(math.log(recs["head"]["tflops"] / recs["base"]["tflops"]))
    return ratios


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not 1 <= len(argv) <= 2:
        log(__doc__)
        return 2
    out, count = Path(argv[0]), int(argv[1]) if len(argv) > 1 else 8
    sides, names = [Side("base", REPO_ROOT), Side("head", REPO_ROOT)], ["base", "head"]
    records: dict[str, list[dict[str, Any]]] = {"warm": [], "fresh": []}
    with WarmEngine(sides, device="cuda", log=log) as warm, FreshEngine(sides, device="cuda", log=log) as fresh:
        for kind, engine, rounds in (("warm", warm, count), ("fresh", fresh, 2)):
            for i in range(rounds):
                rnd = engine.measure_round(rotating_order(names, i), BENCHMARKS, round_index=i).to_json()
                records[kind].append(rnd)
                for proc in rnd["processes"]:
                    for bench_id, rec in proc["records"].items():
                        idle = rec.get("idle") or {}
                        log(f"{kind} round {i + 1} {proc['side']} {bench_id}: {rec.get('tflops', rec.get('error'))} "
                            f"idle {idle.get('status')} waited {idle.get('waited_s')} s, measure {rec.get('measure_s')} s")
            if kind == "warm":
                warm.close()  # the fresh rounds find the GPU as a fresh process expects it: no other context
    for kind, rounds in records.items():
        print(f"{kind}: {json.dumps(cost_summary(rounds))}")
        for bench in BENCHMARKS:
            ratios = log_ratios(rounds, bench.id)
            sd = f"{statistics.stdev(ratios):.5f}" if len(ratios) > 1 else "-"
            mean = f"{statistics.mean(ratios):+.5f}" if ratios else "-"
            print(f"  {bench.id}: {len(ratios)} rounds, mean log ratio {mean}, SD {sd}")
    out.write_text(json.dumps(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
