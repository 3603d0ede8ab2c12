"""How far a pair's first side is from its partner, by how that first side warmed up and what ran before it.

For gate and calibration records (JSON) of A/A rounds: for each pair of the Triton benchmarks, the log-ratio of the
first-measured side's median to the second's (positive: the first side slower), grouped by the first side's warm-up
("settled": one launch; "full": the suite's warm-up) and by what the device timed just before ("first" of the round,
"same family": the same kernel, another config or shape; "other family"). Records with a real change between the sides
(one-pass, mixed PRs) do not belong here: a change shows as a spread that alternates with the order.

    python3 docs/data/warmup_bias.py docs/data/gpu_day_one_h100/calibrate/calibration.json \
        docs/data/gpu_day_one_h100/model/aa_model_?.json

Version 7b's rule (docs/SPEED_GATE.md, "Warm-up by the device's state") came from this table.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path


def pairs(record: dict) -> Iterator[tuple[str, str, float]]:
    """(warm-up, predecessor, first side's slowdown in %) for each Triton pair measured on both sides."""
    for rnd in record.get("rounds") or []:
        if not isinstance(rnd, dict):
            continue
        records = {p["side"]: p["records"] for p in rnd.get("processes") or []}
        order = rnd.get("order") or []
        if len(order) != 2 or any(side not in records for side in order):
            continue
        sequence = rnd.get("sequence") or list(records[order[0]])
        for i, bench_id in enumerate(sequence):
            first, second = records[order[0]].get(bench_id, {}), records[order[1]].get(bench_id, {})
            if not bench_id.startswith("triton") or "median_s" not in first or "median_s" not in second:
                continue
            family = bench_id.split("[")[0]
            before = (
                "first" if i == 0 else ("same family" if sequence[i - 1].split("[")[0] == family else "other family")
            )
            warmup = "settled" if first.get("warmup_launches") == 1 else "full"
            yield warmup, before, 100 * math.log(first["median_s"] / second["median_s"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", nargs="+", type=Path, help="gate or calibration JSON records of A/A rounds")
    args = parser.parse_args(argv)
    groups: dict[tuple[str, str], list[float]] = {}
    for path in args.records:
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            print(f"warmup_bias: {path}: {exc}", file=sys.stderr)
            return 2
        for warmup, before, slowdown in pairs(record):
            groups.setdefault((warmup, before), []).append(slowdown)
    print("| first side's warm-up | before it | pairs | mean | SD | mean abs |")
    print("|---|---|---|---|---|---|")
    for (warmup, before), values in sorted(groups.items()):
        print(
            f"| {warmup} | {before} | {len(values)} | {statistics.mean(values):+.3f}% | "
            f"{statistics.pstdev(values):.3f}% | {statistics.mean(abs(v) for v in values):.3f}% |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
