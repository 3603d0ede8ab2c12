"""How the published history and the main job grow with the history: a benchmark, not a test.

    PYTHONPATH=. python docs/data/history_scale.py --commits 100 1000 10000 [--work /tmp/history-scale] [--out docs/data/history_scale.json]
    PYTHONPATH=. python docs/data/history_scale.py --table docs/data/history_scale.json      # the Markdown table

For each N, in a fresh clone of this checkout's HEAD (commit first: the clone runs the committed code):
a synthetic history of N commits on main and their results on asv-results (ci.history.synthetic: a GPU
machine with the 30 measured GEMM benchmarks and their records, and compile-only's counts; 3 steps of
1-3% per line, a slow AR(1) wander of SD 0.25%, 0.1% commit noise), the newest commit's results held
back. Then, each command timed with /usr/bin/time (wall, CPU, peak RSS of the process tree):

1. full publish: ``python -m ci.history.publish --local-branch`` with nothing cached (the Pages job's first run);
2. the newest commit's results arrive on asv-results; publish again (what each merge costs: caches kept);
3. the main job with nothing new: ``--tracks gpu`` (run once first to bring the branch in and measure the
   newest commit on this machine's timing track, not timed), then ``--tracks cpu``, each ``--no-publish``
   (their commit and merge steps: the report's step seconds).

Site MB and the largest file of the site (MB) after step 2. Results go to --out as JSON; --table prints them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ci.history import synthetic

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def timed(cmd: list[str], cwd: Path, log: Path) -> dict:
    """Run ``cmd`` under /usr/bin/time; wall, user+sys CPU seconds, peak RSS MiB, exit code."""
    stats = log.with_suffix(".time")
    started = time.monotonic()
    with open(log, "w") as out:
        code = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", "-o", str(stats), *cmd], cwd=cwd, stdout=out,
                              stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(cwd)}).returncode
    wall = time.monotonic() - started
    user, system, rss_kib = stats.read_text().split()[-3:]
    return {"wall_s": round(wall, 1), "cpu_s": round(float(user) + float(system), 1), "peak_rss_mib": round(int(rss_kib) / 1024),
            "exit": code}


def site_size(site: Path) -> dict:
    files = [p for p in site.rglob("*") if p.is_file()]
    largest = max(files, key=lambda p: p.stat().st_size)
    return {"site_mb": round(sum(p.stat().st_size for p in files) / 1e6, 1),
            "largest_mb": round(largest.stat().st_size / 1e6, 2), "largest": str(largest.relative_to(site))}


def one(commits: int, work: Path) -> dict:
    clone = work / f"n{commits}"
    shutil.rmtree(clone, ignore_errors=True)
    subprocess.run(["git", "clone", "--quiet", "--no-local", str(REPO), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "remote", "remove", "origin"], check=True)  # the local asv-results is the branch
    started = time.monotonic()
    truth, held_back = synthetic.make_history(clone, synthetic.Spec(commits=commits), hold_back=1)
    row: dict = {"commits": commits, "generate_s": round(time.monotonic() - started, 1)}
    (work / f"n{commits}.truth.json").write_text(json.dumps(truth.to_json()))
    publish = [PYTHON, "-m", "ci.history.publish", "--local-branch", "--out", str(clone / "site")]
    row["full_publish"] = timed([*publish, "--json", str(work / f"n{commits}.full.json")], clone, work / f"n{commits}.full.log")
    next(held_back)
    row["incremental_publish"] = timed([*publish, "--json", str(work / f"n{commits}.incr.json")], clone, work / f"n{commits}.incr.log")
    row |= site_size(clone / "site")
    job = [PYTHON, "-m", "ci.history", "--commits", "1", "--no-publish", "--machine", synthetic.Spec(commits).gpu_machine]
    row["main_job_setup"] = timed([*job, "--tracks", "gpu"], clone, work / f"n{commits}.setup.log")
    for track in ("gpu", "cpu"):
        report = work / f"n{commits}.noop-{track}.json"
        row[f"main_job_noop_{track}"] = timed([*job, "--tracks", track, "--json", str(report)], clone, work / f"n{commits}.noop-{track}.log")
        if report.exists():
            row[f"main_job_noop_{track}"]["steps"] = json.loads(report.read_text()).get("step_seconds")
    for name in ("full", "incr"):
        report = work / f"n{commits}.{name}.json"
        if report.exists():
            data = json.loads(report.read_text())
            row[f"{name}_publish_steps"] = data["seconds"]
            row[f"{name}_change_points"] = sum(len(m["change_points"]) for m in data["machines"])
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


def markdown(rows: list[dict]) -> str:
    head = ("| commits | full publish s (CPU s) | after one new commit s (CPU s) | site MB | largest file MB | peak RSS MiB "
            "| main job no-op, GPU track s | main job no-op, compile track s |")
    out = [head, "|---" * 8 + "|"]
    for r in rows:
        peak = max(r["full_publish"]["peak_rss_mib"], r["incremental_publish"]["peak_rss_mib"],
                   r["main_job_noop_gpu"]["peak_rss_mib"], r["main_job_noop_cpu"]["peak_rss_mib"])
        out.append(f"| {r['commits']} | {r['full_publish']['wall_s']} ({r['full_publish']['cpu_s']}) | "
                   f"{r['incremental_publish']['wall_s']} ({r['incremental_publish']['cpu_s']}) | {r['site_mb']} | "
                   f"{r['largest_mb']} ({r['largest']}) | {peak} | {r['main_job_noop_gpu']['wall_s']} | {r['main_job_noop_cpu']['wall_s']} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--work", type=Path, default=Path("/tmp/history-scale"))
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("history_scale.json"))
    parser.add_argument("--table", type=Path, metavar="JSON", help="print the Markdown table of a written file and stop")
    args = parser.parse_args(argv)
    if args.table:
        print(markdown(json.loads(args.table.read_text())["rows"]))
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    rows = [one(n, args.work) for n in args.commits]
    document = {"what": "docs/data/history_scale.py", "code": head, "machine": f"{os.cpu_count()} CPUs", "rows": rows}
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
