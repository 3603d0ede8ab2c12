"""The history store's cost as the history grows: a benchmark, not a test (issue 48, deliver 1).

    PYTHONPATH=. python docs/data/history_store.py --commits 1000 5000 --work /tmp/store --out docs/data/history_store.json

For each N: a results folder of N commits x 3 GPU-like machines + compile-only (tests/synthetic_history.py's
``results_folder_commits``: dated in the past, heavy-tailed gaps, 5% exact repeats; written straight to disk, no
git), the newest commit held back. Then, each in a child process under /usr/bin/time (wall, CPU, peak RSS):

1. ``full``: no database; the store built from every file (``Store.update``, 2 worker processes), then what the
   site build reads from it: the change points and drift guard series by series (``regressions.store_checks``), the
   kernel pages' data line by line (``kernel_page.page_data_from_store``) and the kernel pages written;
2. ``one new``: the held-back commit's files written; the same again (the database kept);
3. ``nothing new``: the same again.

``--build FOLDER --site SITE [--before]``: one build alone (what each step runs); ``--before`` with PYTHONPATH at an
older checkout (main before the indexed store): its ``Store.summaries``, the whole History in memory, its
``regressions.all_checks`` and ``kernel_page.publish_history``, for the same folder (its database ``before.sqlite``).

``--generate-only`` writes each folder and its held-back newest commit (``held.json``) once; ``--reuse`` measures such a
folder again from nothing kept (its newest commit taken out, the database, line cache and site removed): the 50,000
folder takes ~12 CPU min to generate.

Not in it: bringing the files from the asv-results branch into the mirror (git), asv's own pages (a window of fixed
length). The database's size and the largest file written are kept per N.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))  # the synthetic histories are test support
END = 1_796_000_000.0  # 2026-11-30: every synthetic history here ends before it (dated in the past, reproducible)
PAGE_WINDOW = 200


def build(results: Path, site: Path, workers: int) -> dict:
    """The store brought up to date, then the checks and the kernel pages read from it (the site build's middle)."""
    from ci.history.asv_results import store
    from ci.history.site import commit_info, kernel_page, page_changes
    from ci.history.trends import regressions

    seconds, mark = {}, time.process_time()
    kept = store.Store(store.default_path(results), workers=workers)
    kept.update(results)
    seconds["update"] = round(time.process_time() - mark, 2)
    mark = time.process_time()
    commits = kept.commits()  # by date: these commits are no repository's
    info = commit_info.from_dates(kept.dates())
    checks = regressions.store_checks(kept, commits)
    seconds["checks"] = round(time.process_time() - mark, 2)
    mark = time.process_time()
    when = commit_info.axis_seconds(kernel_page.commit_axis(commits), info)
    data = kernel_page.page_data_from_store(kept, commits, page_changes.from_checks(checks), PAGE_WINDOW, when)
    written = kernel_page.publish_pages(site, data, checks, "history_store.py", info)
    seconds["pages"] = round(time.process_time() - mark, 2)
    return measured(kept, len(commits), checks, written, seconds, store.default_path(results))


def build_before(results: Path, site: Path) -> dict:
    """The same from an older checkout's store (run with PYTHONPATH at it): every summary read into memory, one
    History, its checks and pages (``--before``; its database beside the folder as ``before.sqlite``)."""
    from ci.history.asv_results import store
    from ci.history.site import commit_info, kernel_page
    from ci.history.trends import regressions

    seconds, mark = {}, time.process_time()
    kept = store.Store(results.with_name("before.sqlite"))
    summaries = kept.summaries(results)
    history = store.history(summaries)
    seconds["update"] = round(time.process_time() - mark, 2)
    mark = time.process_time()
    checks = regressions.all_checks(history, kept)
    seconds["checks"] = round(time.process_time() - mark, 2)
    mark = time.process_time()
    info = commit_info.from_summaries(summaries)
    written = kernel_page.publish_history(site, history, checks, PAGE_WINDOW, "history_store.py", info)
    seconds["pages"] = round(time.process_time() - mark, 2)
    return measured(kept, len(history.commits), checks, written, seconds, results.with_name("before.sqlite"))


def measured(kept, commits: int, checks: list, written: list[Path], seconds: dict, database: Path) -> dict:
    """One build's row: what the store parsed and reused (it is closed here), the pages, the process's peak."""
    parsed, reused = kept.parsed, kept.reused
    kept.close()
    largest = max(written, key=lambda p: p.stat().st_size)
    return {
        "parsed": parsed,
        "reused": reused,
        "commits": commits,
        "change_points": sum(len(m["change_points"]) for m in checks),
        "process_cpu_s": seconds,
        "self_peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "largest_page_mb": round(largest.stat().st_size / 1e6, 2),
        "largest_page": largest.name,
        "database_mb": round(database.stat().st_size / 1e6, 1),
    }


def timed(args: list[str], log: Path) -> dict:
    stats = log.with_suffix(".time")
    started = time.monotonic()
    code = subprocess.run(
        ["/usr/bin/time", "-f", "%U %S %M", "-o", str(stats), sys.executable, __file__, *args],
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
        env={
            **os.environ,
            # the checkout first, then what the caller's path adds (a package installed beside the venv)
            "PYTHONPATH": os.pathsep.join(
                [str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
            ),
        },
    ).returncode
    user, system, rss_kib = stats.read_text().split()[-3:]
    out = {
        "wall_s": round(time.monotonic() - started, 1),
        "cpu_s": round(float(user) + float(system), 1),  # the child's and its workers' (waited for)
        "peak_rss_mib": round(int(rss_kib) / 1024),  # the largest single process
        "exit": code,
    }
    lines = log.read_text().splitlines()
    if code == 0 and lines:
        out |= json.loads(lines[-1])
    return out


def generated(commits: int, work: Path, reuse: bool) -> tuple[Path, dict[str, bytes], float]:
    """A results folder of ``commits - 1`` commits and the newest commit's files (held back, kept beside it in
    ``held.json`` so that ``--reuse`` can measure the same folder again: its newest commit taken out, everything the
    builds wrote removed); and the CPU seconds its generation took."""
    import shutil

    import synthetic_history as synthetic

    folder = work / f"n{commits}"
    results, held = folder / "results", folder / "held.json"
    if reuse and held.is_file():
        kept = json.loads(held.read_text())
        newest = {relative: data.encode("latin-1") for relative, data in kept["files"].items()}
        for relative in newest:
            (results / relative).unlink(missing_ok=True)
        shutil.rmtree(folder / "site", ignore_errors=True)
        for written in folder.glob("results.cache.sqlite*"):  # the database, its journal, its line cache
            written.unlink()
        return results, newest, kept["generate_cpu_s"]
    shutil.rmtree(folder, ignore_errors=True)
    started = time.process_time()
    arriving = synthetic.results_folder_commits(synthetic.Spec(commits=commits, end=END))
    synthetic.write_results_folder(results, arriving, commits - 1)
    _, newest = next(arriving)
    seconds = round(time.process_time() - started, 1)
    files = {relative: data.decode("latin-1") for relative, data in newest.items()}
    held.write_text(json.dumps({"generate_cpu_s": seconds, "files": files}))
    return results, newest, seconds


def one(commits: int, work: Path, workers: int, reuse: bool = False) -> dict:
    results, newest, seconds = generated(commits, work, reuse)
    folder = results.parent
    site = folder / "site"
    row: dict = {"commits": commits, "machines": 4, "generate_cpu_s": seconds, "reused_generation": reuse}
    row["load_before"] = [round(v, 2) for v in os.getloadavg()]
    args = ["--build", str(results), "--site", str(site), "--workers", str(workers)]
    row["full"] = timed(args, folder / "full.log")
    for relative, data in newest.items():  # the held-back commit arrives
        path = results / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    row["one_new"] = timed(args, folder / "one_new.log")
    row["nothing_new"] = timed(args, folder / "nothing_new.log")
    row["load_after"] = [round(v, 2) for v in os.getloadavg()]
    row["results_files"] = sum(1 for _ in results.rglob("*.json"))
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


def markdown(rows: list[dict]) -> str:
    """One row per size and step: wall s, CPU s (with the workers'), the build's own CPU s per part, peak RSS, and
    the growth per 1,000 commits against the size before."""
    out = [
        "| commits x 4 machines | step | wall s | CPU s | update / checks / pages CPU s | peak RSS MiB | files read "
        "| database MB | largest page MB | CPU s per 1,000 commits (vs the size before) |",
        "|---" * 10 + "|",
    ]
    before: dict | None = None
    for row in rows:
        for step in ("full", "one_new", "nothing_new"):
            x = row[step]
            parts = x.get("process_cpu_s") or {}
            per = x["cpu_s"] / row["commits"] * 1000
            grown = ""
            if before is not None:
                then = before[step]["cpu_s"] / before["commits"] * 1000
                grown = f" (x{per / then:.2f})"
            out.append(
                f"| {row['commits']:,} | {step.replace('_', ' ')} | {x['wall_s']} | {x['cpu_s']} | "
                f"{parts.get('update')} / {parts.get('checks')} / {parts.get('pages')} | {x['peak_rss_mib']} | "
                f"{x.get('parsed')} | {x.get('database_mb')} | {x.get('largest_page_mb')} | {per:.2f}{grown} |"
            )
        before = row
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--work", type=Path, default=Path("/tmp/history-store"))
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("history_store.json"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--reuse", action="store_true", help="measure a folder an earlier run generated again (its held.json)"
    )
    parser.add_argument("--generate-only", action="store_true", help="generate the folders (and held.json), no build")
    parser.add_argument("--build", type=Path, help=argparse.SUPPRESS)  # the child: one build of this results folder
    parser.add_argument("--site", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--before", action="store_true", help="with --build: the older store's way (build_before)")
    parser.add_argument("--table", type=Path, metavar="JSON", help="print the Markdown table of a written file")
    args = parser.parse_args(argv)
    if args.table:
        print(markdown(json.loads(args.table.read_text())["rows"]))
        return 0
    if args.build:
        done = build_before(args.build, args.site) if args.before else build(args.build, args.site, args.workers)
        print(json.dumps(done))
        return 0
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    if args.generate_only:
        for n in args.commits:
            generated(n, args.work, args.reuse)
        return 0
    rows = [one(n, args.work, args.workers, args.reuse) for n in args.commits]
    document = {"what": "docs/data/history_store.py", "code": head, "command": " ".join(sys.argv), "rows": rows}
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
