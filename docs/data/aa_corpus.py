"""The H200 A/A replay corpus (issue 37, deliver 3): every recorded A/A round under docs/data, by worker generation.

    PYTHONPATH=. .venv/bin/python docs/data/aa_corpus.py                       # writes docs/data/aa_corpus.json
    PYTHONPATH=. .venv/bin/python docs/data/aa_corpus.py --record NEW.json     # + a calibration / identical-code record
    PYTHONPATH=. .venv/bin/python docs/data/aa_corpus.py --assume-aa NEW.json "why it is A/A"   # + a speed-neutral PR
    PYTHONPATH=. .venv/bin/python docs/data/aa_corpus.py --summary             # the summary table (Markdown)
    # The H100's day one (docs/data/gpu_day_one_h100): its calibration and its three A/A PRs, alone
    PYTHONPATH=. .venv/bin/python docs/data/aa_corpus.py --only --out docs/data/aa_corpus_h100.json \
        --record docs/data/gpu_day_one_h100/calibrate/calibration.json \
        --assume-aa docs/data/gpu_day_one_h100/model/aa_model_1.json "exp/neutral-1 (NEUTRAL)" ...

Per benchmark (``kernel[config]/shape``), per run (record path), per worker generation: the usable rounds' log
ratios ``log(head / base TFLOPS)`` in time order, with both TFLOPS and the round index; excluded rounds dropped by
the record's own exclusion rule (ci.speed.decide.exclusion.paired_rounds), counted per reason. Which records count and
why is :data:`RECORDS` (each checked against its .md/.log, docs/SPEED_GATE.md and make_experiment_branches.py);
:data:`LEFT_OUT` the records looked at and not counted. New records (a later lease) join by re-running with
``--record`` / ``--assume-aa``: the corpus is rebuilt from the records every time, never edited.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from replay_lib import CORPUS_SCHEMA, ROOT, CorpusError, record_generations  # noqa: E402

from ci.common.json_file import JsonFileError, read_json  # noqa: E402
from harness.report import write_json_atomic  # noqa: E402

DATA = HERE
CALIBRATION = None  # a --calibrate record: one commit against itself (no reason needed)
IDENTICAL = None  # a gate record run with --measure-identical: identical code at base and head
NEUTRAL = (
    "exp/neutral-N renames a local of the Triton launch wrapper (launch_options, grid or meta; "
    "docs/data/make_experiment_branches.py): the same work, a launch-path fingerprint that differs"
)
ALL_LAUNCH = (
    "exp/all-launch-paths adds an unused helper to kernels/mxfp4.py: every launch path's source differs, "
    "no work changed (docs/data/noise_model_rates.py)"
)
# (record, reason when the code differs at base and head; None: A/A by the record itself)
RECORDS: list[tuple[str, str | None]] = [
    ("h200_noise_model/calibrate/calibrate.json", CALIBRATION),  # 2026-12-03, code 1a7e123, restart every 2
    ("h200_gpu_cost/aa_ten.json", IDENTICAL),  # 2026-12-02, exp/docs-only, the 10 triton_dot_scaled benchmarks
    ("h200_gpu_cost_v2/aa_ten.json", IDENTICAL),
    ("h200_gpu_cost_v4/aa_ten.json", IDENTICAL),
    ("h200_gpu_cost_v2/all_launch_paths.json", ALL_LAUNCH),  # the default selection, 30 benchmarks
    ("h200_gpu_cost_v4/all_launch_paths.json", ALL_LAUNCH),
    # issue 29's launch-path A/A PRs of the 20 Triton benchmarks (version 5 first cut, version 4 "before", 5b)
    ("h200_noise_model/after/after_aa_1.json", NEUTRAL),
    ("h200_noise_model/after/after_aa_2.json", NEUTRAL),
    ("h200_noise_model/after/after_aa_3.json", NEUTRAL),
    ("h200_noise_model/before/before_aa.json", NEUTRAL),  # decided by version 4's plan; the rounds are A/A rounds
    ("h200_noise_model_v5b/after/after_aa_1.json", NEUTRAL),
    ("h200_noise_model_v5b/after_aa/after_aa_2.json", NEUTRAL),
    ("h200_noise_model_v5b/after_aa/after_aa_3.json", NEUTRAL),
    ("h200_noise_model_v5b/before/before_aa.json", NEUTRAL),
    ("h200_noise_model_v5b/committed/committed_aa_1.json", NEUTRAL),
    ("h200_noise_model_v5b/committed/committed_aa_2.json", NEUTRAL),
    ("h200_noise_model_v5b/committed/committed_aa_3.json", NEUTRAL),  # cut at round 5 by the script's deadline
    ("h200_noise_model_v5b/committed_aa/committed_aa_1b.json", NEUTRAL),
    ("h200_noise_model_v5b/committed_aa/committed_aa_2b.json", NEUTRAL),
    ("h200_noise_model_v5b/committed_aa/committed_aa_3b.json", NEUTRAL),
    # the tracked config alone (exp/neutral-1 with --kernel/--config/--shape); repeat_* and verify/ predate the
    # worker's 2 s first warm-up (their first rounds were off by +0.3 to +0.6%: kept, they are what was measured)
    ("h200_noise_model_v5b/repeat/repeat_aa_tracked_1.json", NEUTRAL),
    ("h200_noise_model_v5b/repeat/repeat_aa_tracked_2.json", NEUTRAL),
    ("h200_noise_model_v5b/verify/verify_aa_tracked.json", NEUTRAL),
    ("h200_noise_model_v5b/warm/warm_aa_tracked_1.json", NEUTRAL),  # --timing warmup_ms=2000
    ("h200_noise_model_v5b/committed_aa/verify_aa_tracked.json", NEUTRAL),
    *[(f"h200_noise_model_v5b/verify_committed/verify_aa_tracked_{i}.json", NEUTRAL) for i in range(1, 6)],
    # issue 37's lease (version 6): the three A/A PRs cut at 1.3 minutes (restart every 4), the three as committed
    # (restart every 2)
    *[(f"h200_zone/kept/aa_{i}.json", NEUTRAL) for i in (1, 2, 3)],
    *[(f"h200_zone/final/final_aa_{i}.json", NEUTRAL) for i in (1, 2, 3)],
]
LEFT_OUT: list[tuple[str, str]] = [
    (
        "h200_speed_gate_rounds.json",
        "an 'experiment' record of 2026-11-30: a fresh process per round (no worker "
        "generations), two GPUs at once, rep_ms=200; its base/base-again rounds are A/A but not the gate's measurement",
    ),
    ("h200_gpu_cost/torch_only.json", "exp/torch-only changes torch_dequant's launch path in a way not shown neutral"),
    ("*slow*, *one_pass*, *faster_one*, *slow_0p25*", "injected slowdowns or speed-ups: not A/A"),
    (
        "h200_gpu_cost*/docs_only.json, comment_only.json, wrong_at_8192.json",
        "no rounds (identical code not measured, or stopped at the correctness check)",
    ),
]
# The floor: at least this many rounds per benchmark from at least this many runs, each run with at least
# this many worker generations ("several").
NEED_ROUNDS, NEED_RUNS, NEED_GENERATIONS = 40, 3, 3


def default_selection() -> list[str]:
    """The gate's default selection on an H200: the 20 Triton benchmarks and torch_dequant's 10 (the calibration's)."""
    record = json.loads((DATA / "h200_noise_model/calibrate/calibrate.json").read_text())
    return [b["id"] for b in record["benchmarks"] if b.get("status") == "gated"]


def relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def build(sources: list[tuple[Path, str | None]]) -> dict:
    benchmarks: dict[str, dict] = {}
    records, notes = [], {}
    for path, why in sources:
        try:
            record = read_json(path)  # plain or gzipped
        except JsonFileError as exc:
            raise CorpusError(f"{path}: cannot read ({exc})") from None
        name = relative(path)
        per_bench, record_notes = record_generations(record, name, why)
        for bench_id, data in per_bench.items():
            benchmarks.setdefault(bench_id, {})[name] = data
        records.append(
            {
                "path": name,
                "mode": record.get("mode"),
                "created": record.get("created"),
                "head": (record.get("head") or {}).get("ref")
                if isinstance(record.get("head"), dict)
                else record.get("head"),
                "why_aa": why
                or (
                    "a --calibrate record: one commit against itself"
                    if record.get("mode") == "calibrate"
                    else "identical code at base and head, measured with --measure-identical"
                ),
                "timing_overrides": record.get("timing_overrides"),
                "benchmarks": len(per_bench),
                "rounds": sum(len(g["log_ratios"]) for d in per_bench.values() for g in d["generations"]),
            }
        )
        if record_notes:
            notes[name] = record_notes
    return {
        "schema": CORPUS_SCHEMA,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "about": "Recorded H200 A/A rounds by benchmark, run and worker generation (docs/data/aa_corpus.py; "
        "docs/SPEED_GATE.md, 'Error rates on recorded rounds')",
        "records": records,
        "left_out": [{"path": p, "why": w} for p, w in LEFT_OUT],
        "notes": notes,
        "need": {"rounds": NEED_ROUNDS, "runs": NEED_RUNS, "generations_per_run": NEED_GENERATIONS},
        "summary": summary(benchmarks, default_selection()),
        "benchmarks": {b: benchmarks[b] for b in sorted(benchmarks)},
    }


def summary(benchmarks: dict, selection: list[str]) -> list[dict]:
    """Per benchmark of the default selection: rounds, runs, generations, and what is short of the issue's floor."""
    rows = []
    for bench_id in selection:
        per_run = benchmarks.get(bench_id, {})
        sizes = {run: [len(g["log_ratios"]) for g in d["generations"]] for run, d in per_run.items()}
        rounds = sum(sum(s) for s in sizes.values())
        several = sum(1 for s in sizes.values() if len(s) >= NEED_GENERATIONS)
        rows.append(
            {
                "benchmark": bench_id,
                "rounds": rounds,
                "runs": len(sizes),
                "generations": sum(len(s) for s in sizes.values()),
                "runs_with_two_generations": sum(1 for s in sizes.values() if len(s) >= 2),
                "runs_with_several_generations": several,
                "excluded": sum(n for d in per_run.values() for n in d["excluded"].values()),
                "short_rounds": max(0, NEED_ROUNDS - rounds),
                "short_runs": max(0, NEED_RUNS - several),
            }
        )
    return rows


def summary_table(corpus: dict) -> str:
    need = corpus["need"]
    lines = [
        f"| benchmark | rounds | runs | generations | runs with >= 2 / >= {need['generations_per_run']} generations | "
        f"excluded rounds | short of {need['rounds']} rounds | short of {need['runs']} runs of >= {need['generations_per_run']} |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in corpus["summary"]:
        lines.append(
            f"| `{r['benchmark']}` | {r['rounds']} | {r['runs']} | {r['generations']} | {r['runs_with_two_generations']} / "
            f"{r['runs_with_several_generations']} | {r['excluded']} | {r['short_rounds'] or '-'} | {r['short_runs'] or '-'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out", type=Path, default=DATA / "aa_corpus.json", help="the corpus JSON (written atomically)"
    )
    parser.add_argument(
        "--record",
        type=Path,
        action="append",
        default=[],
        help="another calibration record, or a gate record whose code is identical at base and head",
    )
    parser.add_argument(
        "--assume-aa",
        nargs=2,
        action="append",
        default=[],
        metavar=("RECORD", "WHY"),
        help="a gate record whose code differs but is speed-neutral, and why",
    )
    parser.add_argument(
        "--only",
        action="store_true",
        help="only the records given (--record, --assume-aa): another runner's corpus, without the H200's RECORDS",
    )
    parser.add_argument("--summary", action="store_true", help="print the summary table of --out (Markdown) and exit")
    args = parser.parse_args(argv)
    try:
        if args.summary:
            print(summary_table(json.loads(args.out.read_text())))
            return 0
        sources = [] if args.only else [(DATA / p, why) for p, why in RECORDS]
        sources += [(p, None) for p in args.record] + [(Path(p), why) for p, why in args.assume_aa]
        corpus = build(sources)
    except (CorpusError, OSError, json.JSONDecodeError) as exc:
        print(f"aa_corpus: {exc}", file=sys.stderr)
        return 2
    write_json_atomic(args.out, corpus)
    print(summary_table(corpus))
    short = [r for r in corpus["summary"] if r["short_rounds"] or r["short_runs"]]
    print(
        f"\n{len(corpus['records'])} records; {len(short)} of {len(corpus['summary'])} benchmarks short of the floor; "
        f"wrote {relative(args.out)}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
