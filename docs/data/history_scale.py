"""How the published history and the main job grow with the history: a benchmark, not a test.

    PYTHONPATH=. python docs/data/history_scale.py --commits 100 1000 10000 20000 [--work /tmp/history-scale] [--out docs/data/history_scale.json]
    PYTHONPATH=. python docs/data/history_scale.py --commits 20000 --out /tmp/n20k.json      # one size; --merge joins them
    PYTHONPATH=. python docs/data/history_scale.py --merge docs/data/history_scale.json /tmp/n10k.json /tmp/n20k.json
    PYTHONPATH=. python docs/data/history_scale.py --table docs/data/history_scale.json      # the Markdown table
    PYTHONPATH=. python docs/data/history_scale.py --interleave --commits 10000 20000 --repeats 2 --out docs/data/history_scale_20k.json

For each N, in a fresh clone of this checkout's HEAD as its main (commit first: the clone runs the committed code):
a synthetic history of N commits on main and their results on asv-results (tests/synthetic_history.py: a GPU
machine with the 30 measured GEMM benchmarks and their records, and compile-only's counts; 3 steps of
1-3% per line, a slow AR(1) wander of SD 0.25%, 0.1% commit noise), the newest commit's results held
back. Then, each command timed with /usr/bin/time (wall, CPU, peak RSS of the process tree):

1. full publish: ``python -m ci.history.publish --local-branch`` with nothing cached (the Pages job's first run);
2. the newest commit's results arrive on asv-results; publish again (what each merge costs: caches kept);
3. the main job with nothing new: ``--tracks gpu`` (run once first to bring the branch in and measure the
   newest commit on this machine's timing track, not timed), then ``--tracks cpu``, each ``--no-publish``
   (their commit and merge steps: the report's step seconds).

``--interleave``: the bound of issue 39 (each size's publish times within 1.5x the smallest size's, per commit),
measured so that a shared machine's load falls on every size alike: a history of each size made first (the newest
``--repeats`` commits' results held back), then ``--repeats`` rounds over the sizes in turn (10k, 20k, 10k, 20k),
each a full publish with nothing cached (the clone's .asv and site removed) and a publish after one held-back
commit's results arrive. Every sample is kept with the load average before and after it; the summary gives each
size's minimum and the ratios of the minima (full publish per commit; one new commit as is).

``--pages-only N``: where writing N commits' files is too slow for the machine at hand, the checks and the kernel
pages alone (the parts of a publish that read the whole history; asv's pages are over a window of fixed length), in
this process, from the summaries the store would keep of the same synthetic history (tests/synthetic_summaries.py):
their CPU seconds, peak RSS and every page's size.

Site MB, the largest file of the site and the largest of asv's graph data (MB) after step 2, and every file over
5 MB (the bound: none at 20,000 commits). The per-commit growth of each time is in the table (seconds per 1,000
commits, and the ratio to the row before: the bar is 1.5). The load average before and after each size is kept
with it: the machine is shared. Results go to --out as JSON; --table prints them.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # the synthetic histories are test support
import synthetic_history as synthetic  # noqa: E402
from synthetic_summaries import summaries as synthetic_summaries  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def timed(cmd: list[str], cwd: Path, log: Path) -> dict:
    """Run ``cmd`` under /usr/bin/time; wall, user+sys CPU seconds, peak RSS MiB, exit code."""
    stats = log.with_suffix(".time")
    started = time.monotonic()
    with open(log, "w") as out:
        code = subprocess.run(
            ["/usr/bin/time", "-f", "%U %S %M", "-o", str(stats), *cmd],
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(cwd)},
        ).returncode
    wall = time.monotonic() - started
    user, system, rss_kib = stats.read_text().split()[-3:]
    return {
        "wall_s": round(wall, 1),
        "cpu_s": round(float(user) + float(system), 1),
        "peak_rss_mib": round(int(rss_kib) / 1024),
        "exit": code,
    }


BOUND_MB = 5.0  # no file of the site over it (issue 39)
PAGE_WINDOW = 200  # the site's default (ci.history.options.SiteOptions.page_window)


def site_size(site: Path) -> dict:
    files = [p for p in site.rglob("*") if p.is_file()]
    largest = max(files, key=lambda p: p.stat().st_size)
    graphs = [p for p in files if p.relative_to(site).parts[0] == "graphs"]
    graph = max(graphs, key=lambda p: p.stat().st_size) if graphs else None
    return {
        "site_mb": round(sum(p.stat().st_size for p in files) / 1e6, 1),
        "largest_mb": round(largest.stat().st_size / 1e6, 2),
        "largest": str(largest.relative_to(site)),
        "largest_graph_mb": round(graph.stat().st_size / 1e6, 2) if graph else None,
        "over_bound": sorted(str(p.relative_to(site)) for p in files if p.stat().st_size > BOUND_MB * 1e6),
    }


def one(commits: int, work: Path) -> dict:
    clone = work / f"n{commits}"
    shutil.rmtree(clone, ignore_errors=True)
    subprocess.run(["git", "clone", "--quiet", "--no-local", str(REPO), str(clone)], check=True)
    subprocess.run(
        ["git", "-C", str(clone), "remote", "remove", "origin"], check=True
    )  # the local asv-results is the branch
    subprocess.run(
        ["git", "-C", str(clone), "checkout", "--quiet", "-B", "main"], check=True
    )  # HEAD of a worktree's branch
    load_before = os.getloadavg()
    started = time.monotonic()
    truth, held_back = synthetic.make_history(clone, synthetic.Spec(commits=commits), hold_back=1)
    row: dict = {
        "commits": commits,
        "generate_s": round(time.monotonic() - started, 1),
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    (work / f"n{commits}.truth.json").write_text(json.dumps(truth.to_json()))
    publish = [PYTHON, "-m", "ci.history.publish", "--local-branch", "--out", str(clone / "site")]
    row["full_publish"] = timed(
        [*publish, "--json", str(work / f"n{commits}.full.json")], clone, work / f"n{commits}.full.log"
    )
    next(held_back)
    row["incremental_publish"] = timed(
        [*publish, "--json", str(work / f"n{commits}.incr.json")], clone, work / f"n{commits}.incr.log"
    )
    row |= site_size(clone / "site")
    job = [
        PYTHON,
        "-m",
        "ci.history",
        "--commits",
        "1",
        "--no-publish",
        "--machine",
        synthetic.Spec(commits).gpu_machine,
    ]
    row["main_job_setup"] = timed([*job, "--tracks", "gpu"], clone, work / f"n{commits}.setup.log")
    for track in ("gpu", "cpu"):
        report = work / f"n{commits}.noop-{track}.json"
        row[f"main_job_noop_{track}"] = timed(
            [*job, "--tracks", track, "--json", str(report)], clone, work / f"n{commits}.noop-{track}.log"
        )
        if report.exists():
            data = json.loads(report.read_text())
            row[f"main_job_noop_{track}"] |= {
                "steps": data.get("step_seconds"),
                "nothing_new": data.get("nothing_new"),
                "status": sorted(set(data.get("status", {}).values())),
            }
    for name in ("full", "incr"):
        report = work / f"n{commits}.{name}.json"
        if report.exists():
            data = json.loads(report.read_text())
            row[f"{name}_publish_steps"] = data["seconds"]
            row[f"{name}_change_points"] = sum(len(m["change_points"]) for m in data["machines"])
    row["load_average"] = {
        "before": [round(v, 2) for v in load_before],
        "after": [round(v, 2) for v in os.getloadavg()],
    }
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


def _load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def _published(report: Path) -> dict:
    """The publish's own --json report: its step seconds and how many commits it drew."""
    if not report.exists():
        return {}
    data = json.loads(report.read_text())
    return {"steps": data.get("seconds"), "change_points": sum(len(m["change_points"]) for m in data["machines"])}


def interleaved(sizes: list[int], repeats: int, work: Path) -> dict:
    """Full publish and publish after one new commit at each of ``sizes``, interleaved (size A, size B, A, B ...)
    ``repeats`` times in this one run, so the ratios between sizes see the same machine (see the doc's --interleave)."""
    clones, arrivals, samples = {}, {}, []
    for n in sizes:
        clone = work / f"n{n}"
        shutil.rmtree(clone, ignore_errors=True)
        subprocess.run(["git", "clone", "--quiet", "--no-local", str(REPO), str(clone)], check=True)
        subprocess.run(["git", "-C", str(clone), "remote", "remove", "origin"], check=True)
        subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", "-B", "main"], check=True)
        started = time.monotonic()
        _, arrivals[n] = synthetic.make_history(clone, synthetic.Spec(commits=n), hold_back=repeats)
        samples.append(
            {"commits": n, "step": "generate", "wall_s": round(time.monotonic() - started, 1), "load": _load()}
        )
        print(json.dumps(samples[-1]), file=sys.stderr, flush=True)
        clones[n] = clone
    for repeat in range(repeats):
        for n in sizes:
            clone = clones[n]
            for cached in (clone / ".asv", clone / "site"):  # nothing cached: a fresh clone's first publish
                shutil.rmtree(cached, ignore_errors=True)
            for step in ("full", "incremental"):
                if step == "incremental":
                    next(arrivals[n])  # the next commit's results arrive on asv-results
                results = int(
                    subprocess.run(
                        ["git", "-C", str(clone), "rev-list", "--count", synthetic.BRANCH],
                        capture_output=True,
                        text=True,
                        check=True,
                    ).stdout
                )
                name = f"n{n}.{repeat}.{step}"
                publish = [
                    PYTHON,
                    "-m",
                    "ci.history.publish",
                    "--local-branch",
                    "--out",
                    str(clone / "site"),
                    "--json",
                    str(work / f"{name}.json"),
                ]
                load = _load()
                sample = {"commits": n, "step": step, "repeat": repeat, "results_commits": results, "load_before": load}
                sample |= timed(publish, clone, work / f"{name}.log")
                sample |= {"load_after": _load(), **_published(work / f"{name}.json")}
                if step == "incremental":
                    sample["site"] = site_size(clone / "site")
                samples.append(sample)
                print(json.dumps(sample), file=sys.stderr, flush=True)
    return {"sizes": sizes, "repeats": repeats, "samples": samples, "summary": interleaved_summary(sizes, samples)}


def interleaved_summary(sizes: list[int], samples: list[dict]) -> dict:
    """Per size and step: the minimum wall and CPU seconds over the repeats and the peak RSS; per commit (full
    publish) and as is (one new commit), each size against the smallest: the bar is 1.5 (issue 39)."""
    out: dict = {}
    for n in sizes:
        for step in ("full", "incremental"):
            mine = [s for s in samples if s["commits"] == n and s.get("step") == step]
            if mine:
                out[f"{n}.{step}"] = {
                    "min_wall_s": min(s["wall_s"] for s in mine),
                    "min_cpu_s": min(s["cpu_s"] for s in mine),
                    "wall_s": [s["wall_s"] for s in mine],
                    "cpu_s": [s["cpu_s"] for s in mine],
                    "peak_rss_mib": max(s["peak_rss_mib"] for s in mine),
                    "exits": sorted({s["exit"] for s in mine}),
                }
    base = sizes[0]
    for n in sizes[1:]:
        for step, per_commit in (("full", True), ("incremental", False)):
            a, b = out.get(f"{base}.{step}"), out.get(f"{n}.{step}")
            if a and b:
                scale = base / n if per_commit else 1.0
                out[f"{n}.{step}"][f"ratio_to_{base}"] = {
                    "wall": round(b["min_wall_s"] / a["min_wall_s"] * scale, 2),
                    "cpu": round(b["min_cpu_s"] / a["min_cpu_s"] * scale, 2),
                    "per_commit": per_commit,
                }
    return out


def interleaved_markdown(document: dict) -> str:
    """Every sample of an --interleave run, in its order, then each size's minima and their ratios."""
    out = [
        "| # | commits | publish | results commits | wall s | CPU s | peak RSS MiB | load before / after (1 min) | exit |",
        "|---" * 9 + "|",
    ]
    number = 0
    for s in document["samples"]:
        if s["step"] == "generate":
            continue
        number += 1
        step = "full (nothing cached)" if s["step"] == "full" else "after one new commit"
        out.append(
            f"| {number} | {s['commits']} | {step} | {s['results_commits']} | {s['wall_s']} | {s['cpu_s']} | "
            f"{s['peak_rss_mib']} | {s['load_before'][0]} / {s['load_after'][0]} | {s['exit']} |"
        )
    out += [
        "",
        "| commits | publish | min wall s | min CPU s | peak RSS MiB | vs the smallest size (wall; CPU) |",
        "|---" * 6 + "|",
    ]
    for key, v in document["summary"].items():
        n, step = key.split(".")
        ratio = next((r for k, r in v.items() if k.startswith("ratio_to_")), None)
        said = (
            (f"x{ratio['wall']}; x{ratio['cpu']}" + (" per commit" if ratio["per_commit"] else " (one commit)"))
            if ratio
            else ""
        )
        out.append(f"| {n} | {step} | {v['min_wall_s']} | {v['min_cpu_s']} | {v['peak_rss_mib']} | {said} |")
    return "\n".join(out)


def _per_1000(row: dict, step: str, before: dict | None) -> str:
    """CPU seconds per 1,000 commits, and its ratio to the row before (CPU: wall time waits on a shared machine)."""
    per = row[step]["cpu_s"] / row["commits"] * 1000
    if before is None:
        return f"{per:.1f}"
    return f"{per:.1f} (x{per / (before[step]['cpu_s'] / before['commits'] * 1000):.2f})"


def pages_only(commits: int, work: Path) -> dict:
    """The checks and the kernel pages of ``commits`` synthetic commits, from in-memory summaries (see the doc)."""
    import resource

    from ci.history.asv_results import store
    from ci.history.site import kernel_page
    from ci.history.trends import regressions

    load_before = os.getloadavg()
    started = time.process_time()
    made, summaries = synthetic_summaries(synthetic.Spec(commits=commits))
    history = store.history(summaries, {c: i for i, c in enumerate(made)})
    mark = time.process_time()
    row: dict = {
        "commits": commits,
        "pages_only": True,
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "summaries_cpu_s": round(mark - started, 1),
    }
    kept = store.Store(None)
    try:
        checks = regressions.all_checks(history, kept)
    finally:
        kept.close()
    row["checks_cpu_s"] = round(time.process_time() - mark, 1)
    mark = time.process_time()
    site = work / f"pages{commits}"
    shutil.rmtree(site, ignore_errors=True)
    kernel_page.publish_history(site, history, checks, PAGE_WINDOW, "pages only")
    row["kernel_pages_cpu_s"] = round(time.process_time() - mark, 1)
    row["page_window"] = PAGE_WINDOW
    row["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    row["change_points"] = sum(len(m["change_points"]) for m in checks)
    row |= site_size(site)
    row["pages_mb"] = {str(p.relative_to(site)): round(p.stat().st_size / 1e6, 2) for p in sorted(site.rglob("*.html"))}
    row["load_average"] = {
        "before": [round(v, 2) for v in load_before],
        "after": [round(v, 2) for v in os.getloadavg()],
    }
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


def markdown(rows: list[dict]) -> str:
    head = (
        "| commits | full publish s (CPU s) | CPU s per 1,000 commits (x previous row) | after one new commit s (CPU s) "
        "| x previous row (CPU) | site MB | largest file MB | largest asv graph MB | peak RSS MiB "
        "| main job no-op, GPU track s (exit) | main job no-op, compile track s (exit) |"
    )
    out = [head, "|---" * 11 + "|"]
    before = None
    for r in (r for r in rows if not r.get("pages_only")):
        peak = max(
            r["full_publish"]["peak_rss_mib"],
            r["incremental_publish"]["peak_rss_mib"],
            r["main_job_noop_gpu"]["peak_rss_mib"],
            r["main_job_noop_cpu"]["peak_rss_mib"],
        )
        incr = r["incremental_publish"]
        ratio = f"x{incr['cpu_s'] / before['incremental_publish']['cpu_s']:.2f}" if before else ""
        gpu, cpu = r["main_job_noop_gpu"], r["main_job_noop_cpu"]
        out.append(
            f"| {r['commits']} | {r['full_publish']['wall_s']} ({r['full_publish']['cpu_s']}) | "
            f"{_per_1000(r, 'full_publish', before)} | {incr['wall_s']} ({incr['cpu_s']}) | {ratio} | {r['site_mb']} | "
            f"{r['largest_mb']} ({r['largest']}) | {r.get('largest_graph_mb', '')} | {peak} | "
            f"{gpu['wall_s']} ({gpu['exit']}) | {cpu['wall_s']} ({cpu['exit']}) |"
        )
        before = r
    pages = [r for r in rows if r.get("pages_only")]
    if pages:
        out += [
            "",
            "| commits (pages only) | summaries CPU s | checks CPU s | kernel pages CPU s | peak RSS MiB | largest page MB "
            "| largest file MB | files over 5 MB |",
            "|---" * 8 + "|",
        ]
        for r in pages:
            page, size = max(((k, v) for k, v in r["pages_mb"].items()), key=lambda item: item[1])
            out.append(
                f"| {r['commits']} | {r['summaries_cpu_s']} | {r['checks_cpu_s']} | {r['kernel_pages_cpu_s']} | "
                f"{r['peak_rss_mib']} | {size} ({page}) | {r['largest_mb']} ({r['largest']}) | {len(r['over_bound'])} |"
            )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, nargs="+", default=[100, 1000, 10000, 20000])
    parser.add_argument("--work", type=Path, default=Path("/tmp/history-scale"))
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("history_scale.json"))
    parser.add_argument(
        "--pages-only",
        action="store_true",
        help="only the checks and the kernel pages, from in-memory summaries (see the doc)",
    )
    parser.add_argument(
        "--interleave",
        action="store_true",
        help="--commits' sizes interleaved --repeats times in one run (full publish, then one new commit)",
    )
    parser.add_argument("--repeats", type=int, default=2, help="with --interleave: rounds over the sizes (default 2)")
    parser.add_argument(
        "--table", type=Path, metavar="JSON", help="print the Markdown table of a written file and stop"
    )
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        metavar="JSON",
        help="write into the first file the rows of all of them (by commits; a later file's row wins) and stop",
    )
    args = parser.parse_args(argv)
    if args.table:
        document = json.loads(args.table.read_text())
        print(interleaved_markdown(document) if "samples" in document else markdown(document["rows"]))
        return 0
    if args.merge:
        documents = [json.loads(p.read_text()) for p in args.merge]
        rows = {r["commits"]: {**r, "code": d.get("code")} for d in documents for r in d["rows"]}
        merged = {**documents[-1], "rows": [rows[n] for n in sorted(rows)]}
        args.merge[0].write_text(json.dumps(merged, indent=1) + "\n")
        print(markdown(merged["rows"]))
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if args.interleave:
        if args.repeats < 1 or len(args.commits) < 2:
            parser.error("--interleave needs two sizes or more and --repeats >= 1")
        document = {
            "what": "docs/data/history_scale.py --interleave",
            "code": head,
            "machine": f"{os.cpu_count()} CPUs",
            "command": " ".join(sys.argv),
            **interleaved(args.commits, args.repeats, args.work),
        }
        temporary = args.out.with_name(args.out.name + ".tmp")
        temporary.write_text(json.dumps(document, indent=1) + "\n")
        temporary.replace(args.out)
        print(json.dumps(document["summary"], indent=1))
        return 0
    rows = [(pages_only if args.pages_only else one)(n, args.work) for n in args.commits]
    document = {
        "what": "docs/data/history_scale.py",
        "code": head,
        "machine": f"{os.cpu_count()} CPUs",
        "rows": rows,
        "command": " ".join(sys.argv),
    }
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
