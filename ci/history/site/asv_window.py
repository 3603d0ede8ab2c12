"""asv's own pages over the newest commits: ``asv publish`` on a view of the results folder, at a cost that stays flat.

The view (``<view>/results/``) holds hard links to the newest ``window`` commits' files of every machine, kept in
step between runs; a copy of asv.conf.json points asv at it, and ``asv publish --no-pull`` runs with
``MXFP4_KERNEL_PAGES=site`` (the kernel pages are the site build's). Why: docs/HISTORY.md, "site/asv_window.py".
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from asv_bench import records
from ci.history.asv_results import folder
from ci.history.measure import asv_driver
from ci.history.messages import HarnessError

# The most commits asv's pages may show: asv writes each graph with every commit of it, and its largest, the GPU
# timings' (40 parameter sets in one file), takes 0.5-0.7 KB a commit (4.76 MB over 10,000 commits of plain ``asv
# publish``, issue 39; 70.9 KB over a window of 100 of the synthetic history, docs/PERF_NOTES.md). 4,000 keeps it
# under ~2.8 MB, well inside the 5 MB a file of the site may weigh at any history length.
MAX_WINDOW = 4000
KERNEL_PAGES_ENV = "MXFP4_KERNEL_PAGES"  # "site": the site build writes the kernel pages, not the plug-in
STAMP_ENV = "MXFP4_SITE_STAMP"  # what the published pages say about where they come from


def _link(source: Path, target: Path) -> None:
    """``target`` becomes a hard link to ``source`` (a copy across file systems), unless it already is one."""
    try:
        if target.exists() and os.path.samefile(source, target):
            return
    except FileNotFoundError:
        pass
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    try:
        os.link(source, partial)
    except OSError:
        shutil.copyfile(source, partial)
    os.replace(partial, target)


def update_view(results_dir: Path, view: Path, commits: Iterable[str]) -> int:
    """Make ``view``/results hold exactly the files of ``commits`` (every machine), each machine.json and
    benchmarks.json; returns how many files the view holds."""
    wanted_stems = {c[:8] for c in commits}
    wanted: dict[Path, Path] = {}
    for machine_dir in folder.machine_dirs(results_dir):
        for path in folder.machine_files(results_dir, machine_dir.name):
            if path.name == "machine.json" or (
                path.name[:8] in wanted_stems and path.suffix in (".json", records.SUFFIX)
            ):
                wanted[view / "results" / machine_dir.name / path.name] = path
    if (results_dir / "benchmarks.json").is_file():
        wanted[view / "results" / "benchmarks.json"] = results_dir / "benchmarks.json"
    for target, source in wanted.items():
        _link(source, target)
    for name in folder.files(view / "results"):
        if view / "results" / name not in wanted:
            (view / "results" / name).unlink()
    return len(wanted)


def config_for(view: Path, html_dir: Path, repo_root: Path) -> Path:
    """A copy of the checkout's asv.conf.json with its results in ``view`` and its HTML in ``html_dir``."""
    import asv.util

    conf = asv.util.load_json(str(repo_root / "asv.conf.json"), js_comments=True)
    # Absolute: asv reads relative paths from the config file's folder, which is the view here.
    conf.update(
        repo=str(repo_root),
        results_dir=str(view / "results"),
        html_dir=str(html_dir),
        env_dir=str(repo_root / ".asv" / "env"),
    )
    path = view / "asv.conf.json"
    path.write_text(json.dumps(conf, indent=1))
    return path


def publish(
    results_dir: Path,
    view: Path,
    html_dir: Path,
    commits: list[str],
    repo_root: Path,
    stamp: str,
    env: dict[str, str] | None = None,
) -> int:
    """asv's pages of ``commits`` (the window) into ``html_dir``; asv's exit code."""
    if len(commits) > MAX_WINDOW:
        raise HarnessError(
            f"asv's pages over {len(commits)} commits: at most {MAX_WINDOW} (asv's graph data grows "
            "with every commit it shows; the kernel pages hold the whole history)"
        )
    update_view(results_dir, view, commits)
    conf = config_for(view, html_dir, repo_root)
    env = {**(env if env is not None else os.environ), KERNEL_PAGES_ENV: "site", STAMP_ENV: stamp}
    if html_dir.exists():
        shutil.rmtree(html_dir)
    return asv_driver.run_streaming(
        [*asv_driver.ASV, "--config", str(conf), "publish", "--no-pull"],
        env,
        label="asv publish (the newest commits)",
        quiet=True,
    )
