"""The H200's gate figures under today's rule, from its recorded runs (issue 46: "the H200 figures of today hold").

    PYTHONPATH=. nice .venv/bin/python docs/data/h200_today.py --out docs/data/h200_today.json

Each H200 gate record of version 6 (docs/data/h200_zone/: the three A/A PRs, the one-pass PR and the GROUP_M tuning PR
of its leases) is replayed as the trusted judge does (``--replay RECORD --judge``, this checkout's plan, thresholds and
the committed H200 model; the same as docs/data/model_vs_none.py). Per record:

- the PR's verdict under today's rule, and the round that ends it: the first round at which a benchmark is decided a
  regression (the gate stops there: FAIL), else the round by which every gated benchmark is decided (PASS); "ran out"
  when the recorded rounds end first (a record stops once its own plan decided, so it may hold fewer rounds than
  today's plan wants);
- the recorded GPU-job wall of those rounds: the record's ``wall_s`` less the recorded rounds after that one (start-up,
  surveys and teardown as recorded; a FAIL's last round counted whole, an upper bound);
- the same plus ~7.5 s a round after the first: version 7 starts new workers every round, where these records kept a
  generation for 2-4 rounds (the H200's cost of a generation, docs/SPEED_GATE.md, "New workers every round").

The replays use the recorded generations (2-4 rounds each), so they hold fewer generation df than a version-7 run of
as many rounds: the round counts are an upper bound on today's at the same data, the second wall an estimate.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from model_vs_none import MODELS, ROOT, decided, replay

from ci.common.files import write_json_atomic

HERE = Path(__file__).resolve().parent
RECORDS = sorted((HERE / "h200_zone").rglob("*.json"))
RESTART_S = 7.5  # a worker generation's cost on the H200 (docs/SPEED_GATE.md, "New workers every round")
BARS = {"exp/neutral": 100.0, "exp/slow": 75.0}  # issue 46: A/A PASS <= 100 s, the one-pass FAIL <= 75 s


def is_gate_record(data: object) -> bool:
    return isinstance(data, dict) and data.get("schema") == "mxfp4-speed-gate/1" and bool(data.get("rounds"))


def kind(head_ref: str) -> str:
    for prefix, name in (("exp/neutral", "A/A"), ("exp/slow", "one-pass"), ("exp/tuning", "tuning")):
        if head_ref.startswith(prefix):
            return name
    return head_ref


def bar(head_ref: str) -> float | None:
    return next((s for prefix, s in BARS.items() if head_ref.startswith(prefix)), None)


def ending(benches: dict[str, dict]) -> tuple[str, int | None]:
    """The PR's verdict and the round that ends it (None: the recorded rounds ran out first)."""
    failing = [decided(b) for b in benches.values() if b.get("verdict") == "regression" and decided(b)]
    if failing:
        return "fail", min(failing)
    rounds = [decided(b) for b in benches.values()]
    if any(r is None for r in rounds):
        return "ran out", None
    return "pass", max(rounds)


def wall_at(record: dict, rounds: int) -> float:
    walls = [float(r.get("wall_s") or 0.0) for r in record["rounds"]]
    return float(record["wall_s"]) - sum(walls[rounds:])


def row(path: Path) -> dict:
    record = json.loads(path.read_text())
    head = (record.get("head") or {}).get("ref", "")
    benches = replay(path, "--noise", str(MODELS["H200"]))
    out = {
        "record": str(path.relative_to(ROOT)),
        "pr": kind(head),
        "recorded": {"verdict": record.get("verdict"), "wall_s": record.get("wall_s"), "rounds": len(record["rounds"])},
        "bar_s": bar(head),
    }
    if benches is None:
        return {**out, "error": "the replay wrote no record"}
    verdict, rounds = ending(benches)
    out.update({"verdict": verdict, "rounds": rounds})
    if rounds is not None:
        out["wall_s"] = round(wall_at(record, rounds), 1)
        out["wall_v7_s"] = round(out["wall_s"] + RESTART_S * (rounds - 1), 1)
    out["undecided"] = sorted(k for k, b in benches.items() if decided(b) is None)
    return out


def table(rows: list[dict]) -> str:
    lines = [
        "| record | PR | recorded (v6) | today: verdict | rounds | recorded wall of those rounds | + a generation "
        "every round | bar |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        rec = r["recorded"]
        wall = f"{r['wall_s']:.1f} s" if "wall_s" in r else "-"
        v7 = f"{r['wall_v7_s']:.1f} s" if "wall_v7_s" in r else "-"
        bar_s = f"<= {r['bar_s']:.0f} s" if r.get("bar_s") else "FAIL"
        lines.append(
            f"| `{r['record'].removeprefix('docs/data/')}` | {r['pr']} | {rec['verdict']}, {rec['rounds']} rounds, "
            f"{rec['wall_s']:.1f} s | {r.get('verdict', r.get('error'))} | {r.get('rounds') or '-'} | {wall} | {v7} | "
            f"{bar_s} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="the JSON (written atomically); without it, only the table")
    args = ap.parse_args()
    t0 = time.process_time()
    rows = [row(p) for p in RECORDS if is_gate_record(json.loads(p.read_text()))]
    result = {"command": "docs/data/h200_today.py " + " ".join(sys.argv[1:]), "rows": rows}
    result["cpu_s"] = round(time.process_time() - t0, 1)
    if args.out:
        write_json_atomic(args.out, result)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
