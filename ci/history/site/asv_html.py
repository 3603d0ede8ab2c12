"""asv plug-in (asv.conf.json "plugins"): the published HTML works wherever it is viewed, whoever runs ``asv publish``.

Run last after asv wrote its page: (1) the pinned ``ci/history/vendor`` libraries instead of CDN links
(ci.history.site.offline_html; a missing or altered one fails the publish), (2) a notice when opened as a file,
(3) notes from the records under each graph (``mxfp4/``), (4) the kernel pages (unless the site build writes them),
(5) asv's step detection is the project's change-point detector (ci.history.site.asv_steps).
Imports asv (only asv loads it); why each: docs/HISTORY.md, "site/asv_html.py".
"""

from __future__ import annotations

import html as html_text
import itertools
import json
import math
import os
import re
import shutil
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from asv import util
from asv.publishing import OutputPublisher
from asv.results import iter_results

from asv_bench import records
from ci.common.files import write_json_atomic, write_text_atomic
from ci.history.asv_results import folder, store
from ci.history.site import asv_steps, offline_html

NOTES_JS = Path(__file__).with_name("asv_html_notes.js")
NOTES_DIR = "mxfp4"

# What every reader of a graph should know about it, beside the graph (benchmark name regex -> note).
STANDING_NOTES = {
    r"bench_gemm\.GemmOnCpu\.": (
        "CPU timings are recorded for reading, not for finding regressions: on the shared 2-core runner one "
        "commit's timing moved 19-45% between runs under a neighbour's load (pinned or not), so asv.conf.json "
        "keeps them off the regressions page. On a CPU the two input sets may stay cache resident."
    ),
    r"bench_gemm\.GemmOn": (
        "Lower is better (seconds per GEMM). TFLOPS below come from the same measurement (2*M*N*K / median); "
        "they are not an asv benchmark, because asv would call a TFLOPS gain a regression. TFLOPS by commit, "
        "higher is better: the 'TFLOPS by kernel' pages (kernels/index.html)."
    ),
}

# Shown instead of the page, before any script of asv's runs, when it is opened from disk.
FILE_URL_NOTICE = """<script>
/* mxfp4: browsers refuse this page's own data requests from file:// URLs; say how to view it. */
if (location.protocol === 'file:') {
  window.js_load_failure = function () {};
  var mxfp4FileNotice = function () {
    document.title = 'asv results: open over http';
    document.body.innerHTML =
      '<div id="mxfp4-file-notice" style="font: 16px sans-serif; margin: 3em; max-width: 50em">' +
      '<h2>This page needs a web server</h2>' +
      '<p>It reads its data (index.json, graphs/) with requests that browsers refuse for pages opened as files ' +
      '(file://). View it over http, any of these ways:</p><ul>' +
      '<li>from the checkout: <code>.venv/bin/asv preview</code>, then open the address it prints ' +
      '(http://127.0.0.1:8080)</li>' +
      '<li>from this folder: <code>python3 -m http.server 8080</code>, then open http://127.0.0.1:8080/</li>' +
      '<li>publish the folder with GitHub Pages (it is a static site with its libraries in vendor/)</li></ul></div>';
  };
  document.addEventListener('DOMContentLoaded', mxfp4FileNotice);
  window.addEventListener('load', function () { setTimeout(mxfp4FileNotice, 0); });
}
</script>
"""


# asv's navigation bar gets a link to the kernel pages, after its Regressions item.
REGRESSIONS_NAV_ITEM = '<li id="nav-li-regressions"><a href="#/regressions">Regressions</a></li>'
KERNEL_PAGES_LINK_ID = "mxfp4-kernel-pages"
SITE_STAMP_ID = "mxfp4-site-stamp"
KERNEL_PAGES_ENV = (
    "MXFP4_KERNEL_PAGES"  # "site": ci.history.site.site_build writes the kernel pages (ci.history.site.asv_window)
)
STAMP_ENV = "MXFP4_SITE_STAMP"  # which results commit the site was built from, and when


def kernel_pages_link() -> str:
    return (
        f'\n\t<li id="{KERNEL_PAGES_LINK_ID}"><a href="{_kernel_page().PAGES_DIR}/index.html" '
        'title="TFLOPS by commit per kernel, from the same measurements as these seconds">TFLOPS by kernel (higher '
        "is better)</a></li>"
    )


def _kernel_page():
    """ci.history.site.kernel_page, imported when publishing: asv loads this plug-in for every command,
    and ``asv run`` must measure and record on a machine without plotly (the H200 image has none)."""
    try:
        from ci.history.site import kernel_page
    except ModuleNotFoundError as exc:
        raise MissingLibraries(f"the kernel pages need {exc.name} (pinned in ci/constraints-cpu.txt): {exc}") from None
    return kernel_page


class MissingLibraries(util.UserError):
    pass


# asv's Regressions page lists the steps of the project's change-point detector (ci.history.site.asv_steps).
asv_steps.install()


class Mxfp4Html(OutputPublisher):
    """Runs last (order) so that every other publisher's files are written before it edits the page."""

    name = "mxfp4"
    button_label = "MXFP4 notes"
    description = "Offline libraries, file:// notice, notes beside each graph"
    order = math.inf

    @classmethod
    def publish(cls, conf, repo, benchmarks, graphs, revisions):
        html = Path(conf.html_dir)
        notes = collect_notes(Path(conf.results_dir), benchmarks, revisions)
        (html / NOTES_DIR).mkdir(parents=True, exist_ok=True)
        write_json_atomic(html / NOTES_DIR / "index.json", notes["index"])
        for name, data in notes["per_benchmark"].items():
            write_json_atomic(html / NOTES_DIR / f"{name}.json", data)
        # The site build (ci.history.site.site_build) publishes asv over the newest commits only and writes the kernel
        # pages itself, from the whole history; a plain `asv publish` writes them here, from what asv sees.
        if os.environ.get(KERNEL_PAGES_ENV) != "site":
            _kernel_page().publish(html, Path(conf.results_dir), revisions)
        bound_graphs(html, (graph.path for _, graph in graphs), revisions)
        finish_page(html, os.environ.get(STAMP_ENV, ""))


# What a plain `asv publish` keeps in each graph file: the newest commits (asv writes every commit of the results folder
# into one file per benchmark and machine, ~0.5-0.7 KB a commit: 9.5 MB at 20,000). 4,000 commits are ~2-3 MB, the
# site build's largest --asv-window; the whole history is on the kernel pages.
PLAIN_WINDOW = 4000


def bound_graphs(html: Path, paths: Any, revisions: dict[str, int], window: int = PLAIN_WINDOW) -> list[str]:
    """Each of asv's graph files (``paths``, relative to ``html``, without ".json") cut to the newest ``window``
    revisions of ``revisions``; returns the files cut. asv's Regressions page was computed before, from every
    commit."""
    ordered = sorted(set(revisions.values()))
    if len(ordered) <= window:
        return []
    oldest = ordered[-window]
    cut = []
    for path in paths:
        file = html / f"{path}.json"
        try:
            points = json.loads(file.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(points, list) and points and all(isinstance(p, list) and p for p in points):
            kept = [p for p in points if isinstance(p[0], (int, float)) and p[0] >= oldest]
            if len(kept) < len(points):
                write_text_atomic(file, json.dumps(kept, separators=(",", ":")))  # compact, as asv writes it
                cut.append(str(file))
    return cut


def finish_page(html: Path, stamp: str = "") -> None:
    """Localize the libraries, add the file:// notice, the notes script and the site's stamp to ``html``/index.html."""
    try:
        offline_html.localize(html)
    except (offline_html.AssetsUnavailable, FileNotFoundError) as exc:
        write_text_atomic(
            html / "index.html",
            "<!doctype html><html><head><meta charset='utf-8'><title>asv results: libraries missing</title></head>"
            "<body style='font: 16px sans-serif; margin: 3em'><h2>The graphs' JavaScript libraries are missing</h2>"
            f"<p>{html_text.escape(str(exc))}</p><p>The libraries are committed in <code>ci/history/vendor/</code>: "
            "restore them (<code>git checkout -- ci/history/vendor</code>), then <code>asv publish</code> again.</p>"
            "</body></html>\n",
        )
        raise MissingLibraries(
            f"the published page would load its JavaScript from public CDNs, so it was replaced by a page that "
            f"says why: {exc}. Restore ci/history/vendor/ from git (git checkout -- ci/history/vendor), then publish "
            f"again"
        ) from None
    shutil.copyfile(NOTES_JS, html / NOTES_DIR / "notes.js")
    index = html / "index.html"
    text = index.read_text()
    if "mxfp4-file-notice" not in text:
        text = text.replace("<head>", "<head>\n" + FILE_URL_NOTICE, 1)
        text = text.replace("</head>", f'  <script src="{NOTES_DIR}/notes.js"></script>\n  </head>', 1)
        write_text_atomic(index, text)
    if KERNEL_PAGES_LINK_ID not in text and REGRESSIONS_NAV_ITEM in text:
        text = text.replace(REGRESSIONS_NAV_ITEM, REGRESSIONS_NAV_ITEM + kernel_pages_link(), 1)
        write_text_atomic(index, text)
    if stamp and SITE_STAMP_ID not in text and "</body>" in text:
        banner = (
            f'<div id="{SITE_STAMP_ID}" style="position: fixed; bottom: 0; right: 0; font: 11px sans-serif; '
            f'background: #f4f6f8; padding: 2px 8px; z-index: 1000">{html_text.escape(stamp)}</div>'
        )
        write_text_atomic(index, text.replace("</body>", banner + "</body>", 1))
    error_page = html / "error.html"
    if error_page.is_file() and "mxfp4-file-notice" not in error_page.read_text():
        write_text_atomic(error_page, error_page.read_text().replace("<body>", "<body>\n" + FILE_URL_NOTICE, 1))


# ---------------------------------------------------------------------------
# notes from the results and their records
# ---------------------------------------------------------------------------


def collect_notes(results_dir: Path, benchmarks: dict, revisions: dict[str, int]) -> dict[str, Any]:
    """{"index": {...}, "per_benchmark": {name: {...}}}: mxfp4/index.json and mxfp4/<benchmark>.json (notes.js)."""
    has_data: dict[tuple[str, str], bool] = defaultdict(bool)  # (benchmark, machine) -> any finite value
    present: set[tuple[str, str]] = set()  # (benchmark, machine) with a results entry at all
    saved: dict[tuple[str, str, str], float] = {}  # (machine, commit, "benchmark(params)") -> asv's value
    for results in iter_results(str(results_dir)):
        if results.commit_hash not in revisions:
            continue
        machine = results.params.get("machine", "?")
        for key in results.get_result_keys(benchmarks):
            values = results.get_result_value(key, benchmarks[key]["params"])
            has_data[(key, machine)] |= any(_finite(v) for v in values)
            present.add((key, machine))
            combos = itertools.product(*benchmarks[key]["params"]) if benchmarks[key]["params"] else [()]
            for combo, value in zip(combos, values):
                if _finite(value):
                    saved[(machine, results.commit_hash, f"{key}({', '.join(combo)})" if combo else key)] = value

    by_stem = {commit[:8]: commit for commit in revisions}
    per_benchmark: dict[str, dict] = defaultdict(lambda: defaultdict(dict))
    latest: dict[tuple[str, str], tuple[int, dict[str, dict]]] = {}  # (benchmark, machine) -> newest records
    for machine_dir in folder.machine_dirs(results_dir):
        for sidecar, entries in folder.sidecars(results_dir, machine_dir.name, stems=by_stem):
            commit = by_stem[sidecar.name[:8]]
            unsaved = {
                k for k, r in entries.items() if not folder.same_value(r, saved.get((machine_dir.name, commit, k)))
            }
            _add_records(per_benchmark, latest, machine_dir.name, commit, revisions[commit], entries, unsaved)

    _keep_newest_and_flagged(per_benchmark, revisions)
    empty = {}
    machines = sorted({m for _, m in has_data} | {m for _, m in latest})
    without_gpu = _machines_without_gpu(results_dir)
    for name in sorted(benchmarks):
        reasons = {
            m: _not_run_here(name, m, without_gpu) or _why_empty(latest.get((name, m)), (name, m) in present)
            for m in machines
            if not has_data.get((name, m))
        }
        if reasons:
            empty[name] = reasons
    standing = {
        name: [note for pattern, note in STANDING_NOTES.items() if re.match(pattern, name)] for name in benchmarks
    }
    index = {
        "empty": empty,
        # Machines with a value for each benchmark: a thumbnail says "empty" only where this is (notes.js).
        "with_data": {
            name: sorted(m for (n, m), has in has_data.items() if has and n == name) for name in sorted(benchmarks)
        },
        "standing": {k: v for k, v in standing.items() if v},
        "measured": sorted(per_benchmark),
        # What the regressions page says about itself (notes.js): over how many commits, whether any GPU timed.
        "regressions_context": {
            "commits": len(revisions),
            "machines": machines,
            "gpu_machines": sorted(
                {m for (name, m), has in has_data.items() if has and name.startswith("bench_gemm.GemmOnGpu.")}
            ),
            "gpu_history_help": _kernel_page().GPU_HISTORY_HELP,
        },
    }
    return {"index": index, "per_benchmark": {k: dict(v) for k, v in per_benchmark.items()}}


def _keep_newest_and_flagged(per_benchmark: dict, revisions: dict[str, int]) -> None:
    """Per benchmark and machine, only the newest commit's measurements and the flagged ones: what notes.js shows.
    One note per point of a long history made the notes of one benchmark larger than its graph."""
    for data in per_benchmark.values():
        for machine, by_commit in data.get("measured", {}).items():
            newest = max(by_commit, key=lambda c: revisions.get(c, -1))
            data["measured"][machine] = {
                commit: kept
                for commit, entries in by_commit.items()
                if (kept := {params: m for params, m in entries.items() if commit == newest or m["flagged"]})
            }


def _machines_without_gpu(results_dir: Path) -> set[str]:
    """Machines whose machine.json (ci.history.measure.machine_info) says ``gpu: none``: a CPU-only machine, or
    compile-only."""
    infos = {d.name: folder.machine_json(results_dir, d.name) or {} for d in folder.machine_dirs(results_dir)}
    return {machine for machine, info in infos.items() if str(info.get("gpu", "")).startswith("none")}


def _not_run_here(name: str, machine: str, without_gpu: set[str]) -> str | None:
    """Why the main job never runs ``name`` on ``machine`` (ci.history.measure.tracks), or None when it may."""
    if name.startswith("bench_gemm.GemmOnGpu.") and machine in without_gpu:
        return (
            "n/a: no GPU on this machine (the GPU shapes are measured by the GPU runner, whose results reach "
            "this page from the asv-results branch; TFLOPS by kernel: kernels/index.html)"
        )
    if machine == store.COMPILE_MACHINE and name.startswith("bench_gemm."):
        return "not measured here: this machine holds the compile-only resource counts, no timings"
    if name.startswith("bench_resources.") and machine != store.COMPILE_MACHINE:
        return f"not measured here: compile-only counts are recorded under the machine '{store.COMPILE_MACHINE}'"
    return None


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not math.isnan(value)


def _add_records(
    per_benchmark, latest, machine: str, commit: str, revision: int, entries: dict[str, dict], unsaved: set[str]
) -> None:
    """Group one sidecar's records by benchmark; ``unsaved`` ones never reached asv's results (a killed run)."""
    grouped: dict[str, dict[str, dict]] = defaultdict(dict)
    for key, record in entries.items():
        benchmark, _, params = key.partition("(")
        grouped[benchmark][params.rstrip(")")] = record
        if record["status"] == "measured":
            per_benchmark[benchmark]["measured"].setdefault(machine, {}).setdefault(commit, {})[params.rstrip(")")] = {
                "tflops": record.get("tflops"),
                "median_s": record.get("median_s"),
                "note": records.describe(record)
                + (
                    "; not the graph's value: its run was killed before asv saved it (the next main job resumes it)"
                    if key in unsaved
                    else ""
                ),
                "flagged": bool(record.get("flags")),
            }
    for benchmark, by_params in grouped.items():
        if (benchmark, machine) not in latest or latest[(benchmark, machine)][0] < revision:
            latest[(benchmark, machine)] = (revision, by_params)
            # Why each parameter set has no point at the newest commit measured here (n/a or failed).
            per_benchmark[benchmark]["unavailable"][machine] = {
                params: records.describe(r) for params, r in by_params.items() if r["status"] != "measured"
            }


def _why_empty(newest: tuple[int, dict[str, dict]] | None, has_results: bool) -> str:
    if newest is None and not has_results:
        return "not run on this machine yet (no results)"
    if newest is None:
        return (
            "every parameter set was n/a or failed here (asv run --show-stderr prints why; "
            "this benchmark keeps no records)"
        )
    by_params = newest[1]
    reasons = Counter(records.describe(r) for r in by_params.values() if r["status"] != "measured")
    if not reasons:
        return "measured, but no value reached asv's results (see the main job's summary)"
    total = len(by_params)
    return "; ".join(f"{text} ({count} of {total} parameter sets)" for text, count in reasons.most_common())
