"""Issue 38's growth row with more series than changepoint_quality.py's 30: a hold-still rate near 99% needs them.

    PYTHONPATH=. python docs/data/changepoint_growth_large.py --series 150 --out docs/data/changepoint_growth_large.json

The same construction as changepoint_quality.growth_rate (1% noise, a -5% step at commit 30, grown one commit per
run from commit 10, each run given the previous run's change points), another seed, 5x the series.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import changepoint_quality as quality  # noqa: E402

import harness.changepoints as cp  # noqa: E402
from harness.report import write_json_atomic  # noqa: E402

KIND = "issue 38: 1% noise, -5% at 30"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("changepoint_growth_large.json"))
    args = parser.parse_args()
    started = time.monotonic()
    rows = [
        {"kind": KIND, "series": args.series, "seed": args.seed, "since": since, **row}
        for since, row in zip(
            (10, 20), quality.growth_rate(args.series, KIND, cp.DEFAULT_THRESHOLD, args.seed, (10, 20))
        )
    ]
    write_json_atomic(
        args.out,
        {
            "command": " ".join(["python"] + sys.argv),
            "seconds": round(time.monotonic() - started, 1),
            "later": quality.LATER,
            "rows": rows,
        },
    )
    for row in rows:
        print(
            f"from commit {row['since']}: {row['first']} first publications, {row['first_false']} false, "
            f"held 20 runs later {row['first_held']:.1%}; all (run, change point) pairs {row['all_held']:.2%}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
