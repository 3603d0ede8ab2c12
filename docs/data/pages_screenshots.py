"""Screenshots of the published history as people read it, at 10,000 commits (docs/img/site_*.png; issue 39).

    PYTHONPATH=. python docs/data/pages_screenshots.py make --work /tmp/pages-10k --commits 10000
    PYTHONPATH=. python docs/data/pages_screenshots.py publish --work /tmp/pages-10k
    PYTHONPATH=. python docs/data/pages_screenshots.py shoot --work /tmp/pages-10k --out docs/img
    PYTHONPATH=. python docs/data/pages_screenshots.py time-pages --work /tmp/pages-10k   # the kernel pages' CPU seconds

``make``: a clone of this checkout gets a synthetic two-machine history (tests/synthetic_history.py: the H200 GPU
machine with its 30 GEMM lines, 3 steps of 1-3% each; a CPU machine timing bench_gemm.GemmOnCpu, torch_dequant's
4 lines at the CPU shapes; and compile-only's counts) dated in the past by the generator, as a real history is
(the newest commit an hour old, gaps heavy-tailed: 10,000 commits span ~21 months). ``publish``: this checkout's working tree (committed or not) over the clone's code,
then ``python -m ci.history.publish --local-branch``. ``shoot``: headless Chromium at 1600x1200, the site
served on 127.0.0.1: asv's index, one asv graph, asv's Regressions page, the kernels index, one kernel page
(the newest commits, and the whole history). ``time-pages``: the kernel pages alone, CPU seconds and bytes.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))  # the synthetic histories are test support
CODE = ("ci", "harness", "asv_bench", "kernels", "docs/data")
SIZE = (1600, 1200)
CPU_MACHINE = "synthetic-cpu"  # the second machine: no GPU, bench_gemm.GemmOnCpu
SHOTS = {  # file in docs/img -> page of the site (asv's pages take their hash route)
    "site_asv_index.png": "index.html",
    "site_asv_graph.png": "index.html#bench_gemm.GemmOnGpu.track_time",
    "site_asv_regressions.png": "index.html#/regressions",
    "site_kernels_index.png": "kernels/index.html",
    "site_kernel_recent.png": "kernels/torch_dequant.html",
    "site_kernel_all.png": "kernels/torch_dequant-all.html",
}


def _git(repo: Path, *args: str, env: dict | None = None) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env={**os.environ, **(env or {})}
    ).stdout.strip()


def copy_code(clone: Path) -> None:
    """This checkout's working tree (what is being shown, committed or not) over the clone's code."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", *CODE], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    for relative in listed:
        source = REPO / relative
        if source.is_file():
            target = clone / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())


def make(work: Path, commits: int) -> None:
    import synthetic_history as synthetic

    clone = work / "clone"
    shutil.rmtree(clone, ignore_errors=True)
    subprocess.run(["git", "clone", "--quiet", "--no-local", "--branch", "main", str(REPO), str(clone)], check=True)
    _git(clone, "remote", "remove", "origin")
    # The generator dates its commits in the past (the newest an hour before now), as a real history is.
    started = time.monotonic()
    synthetic.make_history(clone, synthetic.Spec(commits=commits, cpu_machine=CPU_MACHINE))
    print(f"{commits} commits and their results in {time.monotonic() - started:.0f} s: {clone}")


def publish(work: Path) -> None:
    clone = work / "clone"
    copy_code(clone)
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ci.history.publish",
            "--local-branch",
            "--out",
            str(work / "site"),
            "--json",
            str(work / "changes.json"),
        ],
        cwd=clone,
        env={**os.environ, "PYTHONPATH": str(clone)},
    )
    print(f"publish exit {done.returncode} in {time.monotonic() - started:.0f} s: {work / 'site'}")
    if done.returncode:
        raise SystemExit(done.returncode)


def time_pages(work: Path) -> None:
    """CPU seconds of the kernel pages alone over the clone's published history (its store already filled by
    ``publish``): what this checkout's ci.history.site.kernel_page costs (PYTHONPATH picks which checkout's)."""
    import inspect

    from ci.history.asv_results import store
    from ci.history.site import kernel_page
    from ci.history.trends import regressions

    clone = work / "clone"
    results = clone / ".asv" / "site-results"
    kept = store.Store(store.default_path(results))
    try:
        summaries = kept.summaries(results)
        order = {c: i for i, c in enumerate(_git(clone, "rev-list", "--all", "--date-order", "--reverse").split())}
        history = store.history(summaries, order)
        checks = regressions.all_checks(history, kept)
    finally:
        kept.close()
    extra = {}
    if "info" in inspect.signature(kernel_page.publish_history).parameters:  # a checkout before issue 39 has no dates
        from ci.history.site import commit_info

        extra["info"] = commit_info.read(clone, summaries)
    started = time.process_time()
    files = kernel_page.publish_history(work / "kernel-pages", history, checks, 200, "stamp", **extra)
    print(
        f"kernel pages of {len(history.commits)} commits: {time.process_time() - started:.2f} CPU s, "
        f"{sum(f.stat().st_size for f in files) / 1e6:.1f} MB, largest page "
        f"{max(f.stat().st_size for f in files if f.suffix == '.html') / 1e6:.2f} MB"
    )


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def handle(self):
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):
            pass


def shoot(work: Path, out: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(work / "site")))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    out.mkdir(parents=True, exist_ok=True)
    try:
        for name, page in SHOTS.items():
            url = f"http://127.0.0.1:{server.server_address[1]}/{page}"
            subprocess.run(
                [
                    "chromium",
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--hide-scrollbars",
                    f"--user-data-dir={work / 'chromium'}",
                    f"--window-size={SIZE[0]},{SIZE[1]}",
                    "--virtual-time-budget=30000",
                    f"--screenshot={out / name}",
                    url,
                ],
                check=True,
                capture_output=True,
                timeout=300,
            )
            print(f"{out / name}: {url}")
    finally:
        server.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("make", "publish", "shoot", "time-pages"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/pages-10k"))
    parser.add_argument("--commits", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    {
        "make": lambda: make(args.work, args.commits),
        "publish": lambda: publish(args.work),
        "shoot": lambda: shoot(args.work, args.out),
        "time-pages": lambda: time_pages(args.work),
    }[args.step]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
