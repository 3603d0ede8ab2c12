"""Summarize a day-one lease (docs/data/gpu_day_one.sh): per gate step its wall, rounds, verdict and the look each
benchmark was decided at; per calibration its rounds, generations, skipped/stopped and weak entries; per step where a
round's seconds went (measuring, the new generation's start-up, and its set-up by part where the record has
``prepare_parts_s``). Reads the step records under the folders given; prints Markdown (the tables in
docs/SPEED_GATE.md) and, with --json, the numbers. A record may be kept gzipped (NAME.json.gz).

    python3 docs/data/day_one_summary.py docs/data/gpu_day_one_h100/calibrate docs/data/gpu_day_one_h100/model ...
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from statistics import median


def step_walls(folder: Path) -> dict[str, tuple[int, float]]:
    """runs.txt: step name -> (exit code, wall seconds) as the lease's script measured them."""
    out = {}
    runs = folder / "runs.txt"
    for line in runs.read_text().splitlines() if runs.exists() else []:
        m = re.match(r"(\S+): exit (\d+), wall ([\d.]+) s", line)
        if m:
            out[m.group(1)] = (int(m.group(2)), float(m.group(3)))
    return out


def gate_row(name: str, record: dict, wall: tuple[int, float] | None) -> dict:
    benches = [b for b in record.get("benchmarks", []) if b.get("status") == "gated"]
    verdicts = Counter((b.get("decision") or {}).get("verdict", "?") for b in benches)
    used = [(b.get("decision") or {}).get("rounds_used") for b in benches]
    return {
        "step": name,
        "exit": record.get("exit_code", wall[0] if wall else None),
        "verdict": record.get("verdict"),
        "wall_s": wall[1] if wall else None,
        "gpu_seconds_spent": record.get("gpu_seconds_spent"),
        "rounds": len(record.get("rounds", [])),
        "gated": len(benches),
        "verdicts": dict(verdicts),
        "max_rounds_used": max((u for u in used if isinstance(u, int)), default=None),
    }


def round_costs(record: dict) -> dict:
    """Median seconds a round: its wall, measuring and start-up (the slower side's), and each set-up part summed over
    a new generation's benchmarks (the slower side's; rounds that started no generation have none)."""
    walls, measure, startup, parts = [], [], [], defaultdict(list)
    for rnd in record.get("rounds", []):
        walls.append(float(rnd.get("wall_s") or 0.0))
        procs = rnd.get("processes", [])
        measure.append(max((float(p.get("measure_s") or 0.0) for p in procs), default=0.0))
        startup.append(max((float(p.get("startup_s") or 0.0) for p in procs), default=0.0))
        sums: dict[str, list[float]] = defaultdict(list)
        for worker in (w for p in procs for w in p.get("workers", [])):
            per_side: dict[str, float] = defaultdict(float)
            for bench_parts in (worker.get("prepare_parts_s") or {}).values():
                for name, seconds in bench_parts.items():
                    per_side[name] += float(seconds)
            for name, seconds in per_side.items():
                sums[name].append(seconds)
        for name, seconds in sums.items():
            parts[name].append(max(seconds))
    pick = lambda xs: round(median(xs), 2) if xs else None  # noqa: E731
    return {
        "round_wall_s": pick(walls),
        "measure_s": pick(measure),
        "startup_s": pick(startup),
        "prepare_parts_s": {name: pick(v) for name, v in sorted(parts.items())},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    for folder in args.folders:
        walls = step_walls(folder)
        for path in sorted([*folder.glob("*.json"), *folder.glob("*.json.gz")]):
            name = path.name.removesuffix(".gz").removesuffix(".json")
            if name.endswith(".changes") or name.startswith("model"):
                continue
            record = json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_text())
            if record.get("mode") == "calibrate":
                name = "calibrate"
            row = gate_row(name, record, walls.get(name))
            row["costs"] = round_costs(record)
            if record.get("mode") == "calibrate":
                model = record.get("noise_model") or {}
                entries = model.get("benchmarks", {})
                row.update(
                    skipped=sorted(record.get("skipped", {})),
                    stopped=sorted(record.get("stopped", {})),
                    weak=sum(1 for e in entries.values() if e.get("weak")),
                    fitted=len(entries),
                    generations=sorted({e.get("generations") for e in entries.values()}),
                )
            rows.append(row)
    print("| step | exit | verdict | wall (s) | rounds | gated | verdicts | most rounds a benchmark used |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        verdicts = ", ".join(f"{n} {v}" for v, n in sorted(r["verdicts"].items()))
        print(
            f"| {r['step']} | {r['exit']} | {r['verdict']} | {r['wall_s']} | {r['rounds']} | {r['gated']} | "
            f"{verdicts} | {r['max_rounds_used']} |"
        )
    print()
    print("| step | median round (s) | measuring | start-up | a new generation's set-up by part (s) |")
    print("|---|---|---|---|---|")
    for r in rows:
        c = r["costs"]
        parts = ", ".join(f"{k} {v}" for k, v in c["prepare_parts_s"].items()) or "not recorded"
        print(f"| {r['step']} | {c['round_wall_s']} | {c['measure_s']} | {c['startup_s']} | {parts} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
