"""The per-kernel TFLOPS pages (ci/history/site/kernel_page.py), from a synthetic results folder, in headless Chromium.

Four commits on an H200 machine: triton_dot_scaled at 8192^3 steps +7% TFLOPS at the third commit
and -3% at the fourth, with compile-only register counts; a CPU-only machine with CPU timings and
the GPU shapes n/a. Chromium renders the page (plotly.js from the published folder, no network)
and its DOM is read back; a screenshot goes to /tmp/kernel_page.png.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from asv.step_detect import detect_regressions, detect_steps

from asv_bench import records
from ci.history.asv_results import store
from ci.history.site import device_peaks, kernel_figure, kernel_page, page_changes
from ci.history.site.commit_info import iso
from ci.history.trends import regressions

CHROMIUM = shutil.which("chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
COMMITS = [f"{i:x}" * 40 for i in (10, 11, 12, 13)]  # aaaa..., bbbb..., cccc..., dddd...
GPU_KEY = "bench_gemm.GemmOnGpu.track_time('triton_dot_scaled:m128_n128_k128_w8_s3', 'square_m08192_n08192_k08192')"
OTHER_SHAPE = "bench_gemm.GemmOnGpu.track_time('triton_dot_scaled:m128_n128_k128_w8_s3', 'square_m16384_n16384_k16384')"
CPU_KEY = "bench_gemm.GemmOnCpu.track_time('torch_dequant:bf16', 'cpu_m00256_n00256_k01024')"
NA_KEY = "bench_gemm.GemmOnGpu.track_time('torch_dequant:bf16', 'square_m08192_n08192_k08192')"
BASE_TFLOPS = 500.0
TFLOPS_BY_COMMIT = [BASE_TFLOPS, BASE_TFLOPS, BASE_TFLOPS * 1.07, BASE_TFLOPS * 1.07 * 0.97]


def _measured(tflops: float, flops: float, flags=(), device="NVIDIA H200") -> dict:
    gpu = None if device == "cpu" else {"name": device, "sm_clock_mhz": 1980, "max_sm_clock_mhz": 1980}
    return {
        "status": "measured",
        "tflops": tflops,
        "median_s": flops / tflops / 1e12,
        "flops": flops,
        "n": 20,
        "relative_iqr": 0.004,
        "flags": list(flags),
        "gpu_before": gpu,
        "gpu_after": gpu,
        "clock": "device events",
    }


def _results_file(folder: Path, commit: str, order: int, results: dict) -> str:
    stem = records.results_file_stem(commit, "env")
    data = {
        "commit_hash": commit,
        "env_name": "env",
        "date": order,
        "params": {"machine": folder.name},
        "version": 2,
        "python": "3.11",
        "requirements": {},
        "result_columns": ["result", "params", "version", "started_at", "duration"],
        "results": results,
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}.json").write_text(json.dumps(data))
    return stem


def make_results(root: Path, with_gpu: bool = True) -> Path:
    results = root / "results"
    for order, (commit, tflops) in enumerate(zip(COMMITS, TFLOPS_BY_COMMIT), start=1):
        if with_gpu:
            stem = _results_file(results / "h200", commit, order, {})
            flags = [records.FLAG_THROTTLED] if order == 2 else []
            records.save(
                results / "h200" / f"{stem}{records.SUFFIX}",
                {
                    GPU_KEY: _measured(tflops, 2 * 8192**3, flags),
                    OTHER_SHAPE: _measured(600.0, 2 * 16384**3),
                },
            )
            registers = {
                "bench_resources.CompiledResources.track_registers": [
                    [168 + order, 40 + order],
                    [["'triton_dot_scaled'"], ["'gfx950'", "'sm_90'"]],
                    "1",
                    0,
                    1.0,
                ]
            }
            _results_file(results / "compile-only", commit, order, registers)
        stem = _results_file(results / "cpu-box", commit, order, {})
        records.save(
            results / "cpu-box" / f"{stem}{records.SUFFIX}",
            {
                CPU_KEY: _measured(0.05 * (1.3 if order == 4 else 1.0), 2 * 256 * 256 * 1024, device="cpu"),
                NA_KEY: {"status": "n/a", "reason": "no GPU on this machine"},
            },
        )
    return results


def test_the_store_reads_each_line_and_the_compile_only_counts(tmp_path):
    history = store.read_history(make_results(tmp_path))
    by_line = store.lines(history.points)
    line = by_line[("h200", "triton_dot_scaled:m128_n128_k128_w8_s3", "square_m08192_n08192_k08192")]
    assert [round(p.tflops) for p in line] == [round(t) for t in TFLOPS_BY_COMMIT]
    assert line[1].flags == (records.FLAG_THROTTLED,) and "SM 1980 MHz before" in line[1].clocks
    assert by_line[("cpu-box", "torch_dequant:bf16", "cpu_m00256_n00256_k01024")][0].is_cpu
    assert history.resources[("triton_dot_scaled", "sm_90", "registers")][-1] == (4, COMMITS[3], 44.0)
    assert {p.machine for p in history.points} == {"h200", "cpu-box"}
    [missing] = {m.why for m in history.missing}
    assert "no GPU on this machine" in missing


def test_asv_never_calls_the_tflops_gain_a_regression():
    """asv tracks the same measurement as seconds: the +7% TFLOPS step is a time drop, which asv's step detection
    (what its regressions page lists, ci's asv.conf.json threshold aside) does not report; the -3% step is a rise
    in time."""
    seconds = [2 * 8192**3 / t / 1e12 for t in TFLOPS_BY_COMMIT[:3] for _ in range(3)]
    latest, best, regressions = detect_regressions(detect_steps(seconds), threshold=0.0)
    assert regressions is None, regressions
    slower = [2 * 8192**3 / t / 1e12 for t in TFLOPS_BY_COMMIT[2:] for _ in range(4)]
    assert detect_regressions(detect_steps(slower), threshold=0.0)[2], "a TFLOPS drop is a time rise: asv reports it"


def test_peaks_name_their_source_and_the_math_the_kernel_runs():
    h200 = device_peaks.peak_for("triton_dot_scaled:m128_n128_k128_w8_s3", "NVIDIA H200")
    assert h200.tflops == 989.0 and "BF16" in h200.math and "datasheet" in h200.source
    mi355 = device_peaks.peak_for("flydsl_gfx950_4wave:default", "AMD Instinct MI355X")
    assert "MXFP4" in mi355.math and "unverified" in mi355.source
    assert device_peaks.peak_for("torch_dequant:bf16", "cpu") is None


def _render(page: Path, profile: Path, screenshot: Path | None = None) -> str:
    args = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=15000"]
    if screenshot is not None:
        subprocess.run(
            [*args, "--window-size=1400,1500", f"--screenshot={screenshot}", page.as_uri()],
            capture_output=True,
            timeout=120,
        )
    proc = subprocess.run([*args, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    return proc.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_the_kernel_page_draws_tflops_higher_is_better_with_its_peak_headroom_and_drift(tmp_path):
    html = tmp_path / "html"
    written = kernel_page.publish(html, make_results(tmp_path))
    page = html / "kernels" / "triton_dot_scaled.html"
    assert page in written and (html / "kernels" / kernel_page.PLOTLY_JS).is_file()
    assert not (html / "kernels" / "triton_dot_scaled-all.html").exists()  # 4 commits: the page holds them all
    assert not re.findall(r"<script[^>]*src=['\"]https?://", page.read_text()), "a CDN link"
    dom = _render(page, tmp_path / "chromium", Path("/tmp/kernel_page.png"))
    assert 'class="main-svg"' in dom, "plotly drew nothing: " + dom[:2000]
    y_titles = re.findall(r'class="g-y?title"[^>]*>.*?<text[^>]*>([^<]*)</text>', dom)
    assert "GPU TFLOPS" in y_titles, y_titles
    assert "higher is better" in dom
    assert "989 TFLOPS" in dom and "datasheet" in dom  # the peak and its source
    assert "register headroom sm_90" in dom
    assert "CPU: not the GPU history" not in dom  # no CPU line for this kernel
    assert 'id="no-gpu"' not in dom
    assert "triangle" not in page.read_text()  # one way to say a step: change points, no commit-to-commit markers
    # The drift guard per GPU line: 4 commits are too few for its noise estimate (>= 5), so no row yet.
    assert 'id="drift"' not in dom
    # Hover: TFLOPS, time, clocks and flags of each point; a click opens the commit on asv's graph.
    text = page.read_text()
    for part in ("TFLOPS</b>", "time (median)", "clocks %{customdata[2]}", "flags %{customdata[3]}"):
        assert part in text, part
    assert "SM 1980 MHz before" in text and records.FLAG_THROTTLED in text
    assert "'../index.html#' + m[0] + '?p-kernel_config='" in text and COMMITS[2][:12] in text  # asv finds it by prefix


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_on_a_machine_without_a_gpu_the_pages_say_where_gpu_history_comes_from(tmp_path):
    html = tmp_path / "html"
    kernel_page.publish(html, make_results(tmp_path, with_gpu=False))
    index = _render(html / "kernels" / "index.html", tmp_path / "chromium-index")
    assert "GPU history comes from the GPU runner" in index and "asv-results" in index
    dom = _render(html / "kernels" / "torch_dequant.html", tmp_path / "chromium-page")
    assert "GPU history comes from the GPU runner" in dom
    assert "CPU: not the GPU history" in dom  # the CPU line's name
    assert "no GPU on this machine" in dom  # why the GPU shapes have no points
    assert "change-points" not in dom.split("Change points")[-1][:200] or "CPU lines are not checked" in dom
    assert "No compile-only register counts in these results" in dom  # why the resource rows are empty


# ---------------------------------------------------------------------------
# change points drawn on the page (ci/history/site/page_changes.py)
# ---------------------------------------------------------------------------

STEP_AT = 6  # the first commit at the new level


def make_step_history(
    root: Path, step: float, commits: int = 12, noise: float = 0.003, seed: int = 3
) -> tuple[Path, list[str]]:
    """One H200 line at 8192^3 over ``commits`` commits, TFLOPS x (1 + step) from commit STEP_AT on, with noise."""
    import numpy as np

    rng = np.random.default_rng(seed)
    results, shas = root / "results", [f"{i + 1:02x}" * 20 for i in range(commits)]
    for order, sha in enumerate(shas, start=1):
        level = BASE_TFLOPS * ((1 + step) if order > STEP_AT else 1.0) * (1 + rng.normal(0, noise))
        stem = _results_file(results / "h200", sha, order, {})
        records.save(results / "h200" / f"{stem}{records.SUFFIX}", {GPU_KEY: _measured(level, 2 * 8192**3)})
    return results, shas


def _changes(results: Path):
    history = store.read_history(results)
    return history, page_changes.from_checks(regressions.all_checks(history))


def test_a_three_percent_drop_is_a_change_point_over_its_commit_range_and_a_flat_history_has_none(tmp_path):
    results, shas = make_step_history(tmp_path / "step", -0.03)
    history, changes = _changes(results)
    [(line, change)] = page_changes.for_kernel(changes, "triton_dot_scaled")
    assert line == ("h200", "triton_dot_scaled:m128_n128_k128_w8_s3", "square_m08192_n08192_k08192")
    assert (change.last_before, change.first_after) == (shas[STEP_AT - 1], shas[STEP_AT])
    assert change.change.direction == "regression" and change.change.relative_change == pytest.approx(-0.03, abs=0.006)
    low, high = change.change.interval
    assert low < change.change.relative_change < high < 0
    assert page_changes.size_label(change).startswith("regression \u22123.")
    when = {sha: 1.7e9 + 3600 * i for i, sha in enumerate(history.commit_axis())}  # one commit an hour
    fig, said = kernel_figure.kernel_figure(
        "triton_dot_scaled", history, page_changes.for_kernel(changes, "triton_dot_scaled"), when=when
    )
    [band] = [s for s in fig["layout"]["shapes"] if s.get("name", "").startswith("change point")]
    # The suspected commits: after the last at the old level, up to the first at the new; on the date axis, between
    # them.
    assert (band["x0"], band["x1"]) == (iso(when[shas[STEP_AT - 1]]), iso(when[shas[STEP_AT]]))
    assert band["fillcolor"] == page_changes.REGRESSION_COLOUR and said["bands"] == said["labelled"] == 1

    gain_results, _ = make_step_history(tmp_path / "gain", +0.07)
    [[found]] = _changes(gain_results)[1].values()
    assert found.change.direction == "improvement" and page_changes.size_label(found).startswith("improvement +7.")

    for seed in range(5):  # flat, with noise: no mark
        flat, _ = make_step_history(tmp_path / f"flat{seed}", 0.0, noise=0.005, seed=seed)
        assert _changes(flat)[1] == {}, seed


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_the_kernel_page_shades_the_change_points_commit_range_with_its_size(tmp_path):
    from ci.history.site import page_changes  # noqa: F401 (the colours below are its)

    results, shas = make_step_history(tmp_path, -0.03)
    html = tmp_path / "html"
    kernel_page.publish(html, results)
    dom = _render(
        html / "kernels" / "triton_dot_scaled.html", tmp_path / "chromium", Path("/tmp/kernel_page_change_point.png")
    )
    assert 'class="main-svg"' in dom, "plotly drew nothing: " + dom[:2000]
    labels = re.findall(
        r'class="annotation-text[^"]*"[^>]*>(?:<[^>]*>)*(regression|improvement) ([^ <]+) \[([^,<]+), ([^\]<]+)\]', dom
    )
    assert [(kind, size[:2]) for kind, size, _, _ in labels] == [("regression", "\u22123")], labels
    # One band in REGRESSION_COLOUR from the last commit at the old level to the first at the new: the suspected
    # range (commit 5, commit 6], between those two points of the line.
    shaded = re.findall(
        r'<path data-index="\d+" fill-rule="evenodd" d="M([\d.]+),[\d.]+H([\d.]+)V[^"]*" '
        r'style="opacity: 0\.18;[^"]*fill: rgb\(215, 48, 39\)',
        dom,
    )
    assert len(shaded) == 1, shaded
    left = float(re.search(r'<g class="xy" transform="translate\(([\d.]+),', dom).group(1))  # the GPU row's plot area
    points = [
        left + float(x) for x in re.findall(r'class="point plotly-customdata" transform="translate\(([\d.]+),', dom)
    ][:12]
    assert (float(shaded[0][0]), float(shaded[0][1])) == (
        pytest.approx(points[STEP_AT - 1], abs=0.5),
        pytest.approx(points[STEP_AT], abs=0.5),
    ), (shaded, points)
    assert "1 on this graph" in dom and "each labelled with the size and its 95% interval" in dom  # what is drawn, said
    rows = re.findall(
        r"<tr class=\"(\w+)-range\"><td>(\w+)</td><td class=\"change\">([^<]*)</td><td class=\"range\">([^<]*)</td>",
        dom,
    )
    # 12 commits, the drop 6 commits back: the drift guard (newest vs the best of the last 10) fails the line too.
    assert 'id="drift"' in dom and "FAILS" in dom
    assert [(r[0], r[1], r[3]) for r in rows] == [
        ("regression", "regression", f"{shas[STEP_AT - 1][:8]}..{shas[STEP_AT][:8]}")
    ], rows
    assert 'id="no-change-points"' not in dom
    flat, _ = make_step_history(tmp_path / "flat", 0.0, noise=0.005)
    kernel_page.publish(tmp_path / "flat-html", flat)
    quiet = _render(tmp_path / "flat-html" / "kernels" / "triton_dot_scaled.html", tmp_path / "chromium-flat")
    assert 'id="no-change-points"' in quiet and "opacity: 0.18;" not in quiet
    assert not re.findall(r'class="annotation-text[^"]*"[^>]*>(?:<[^>]*>)*(regression|improvement) [^ <]+ \[', quiet)


def test_the_asv_plugin_loads_without_plotly_and_publishing_names_what_is_missing():
    """asv imports the plug-in for every command: `asv run` on a GPU runner without plotly (the H200
    image has none) must still measure; only publishing needs plotly, and says so."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['plotly'] = None\n"
        "import ci.history.site.asv_html as h\n"
        "try:\n    h.kernel_pages_link()\nexcept h.MissingLibraries as exc:\n    print('missing:', exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "missing: the kernel pages need plotly" in done.stdout, done.stdout


def test_gpu_and_cpu_lines_never_share_a_y_axis():
    """torch_dequant on an H200 (~100 TFLOPS) and on a CPU (~0.01): on one axis the GPU lines' 1-3% steps are flat."""

    def point(machine: str, device: str, order: int, tflops: float) -> store.Point:
        shape = "cpu_m00256_n00256_k01024" if device == "cpu" else "square_m08192_n08192_k08192"
        return store.Point(
            machine,
            "torch_dequant:bf16",
            shape,
            f"key-{machine}",
            COMMITS[order],
            order,
            tflops,
            1e-3,
            0.0,
            0.0,
            0.01,
            device,
            (),
            "",
            None,
        )

    history = store.History(
        points=[point("h200", "NVIDIA H200", i, 100.0 * (1.02 if i > 1 else 1)) for i in range(4)]
        + [point("cpu-box", "cpu", i, 0.01) for i in range(4)],
        commits={c: i for i, c in enumerate(COMMITS)},
    )
    fig, said = kernel_figure.kernel_figure("torch_dequant", history)
    axes = {t["yaxis"]: set() for t in fig["data"] if t.get("meta")}
    for t in fig["data"]:
        if t.get("meta"):
            axes[t["yaxis"]].add("cpu" if "CPU" in t["name"] else "gpu")
    assert sorted(map(sorted, axes.values())) == [["cpu"], ["gpu"]], axes  # one axis each
    titles = [a["text"] for a in fig["layout"]["annotations"]]
    assert kernel_figure.ROWS["cpu"] in titles and kernel_figure.ROWS["gpu"] in titles
    # A GPU-only history has no CPU row.
    gpu_only = store.History(points=[p for p in history.points if not p.is_cpu], commits=history.commits)
    assert kernel_figure.ROWS["cpu"] not in [
        a["text"] for a in kernel_figure.kernel_figure("torch_dequant", gpu_only)[0]["layout"]["annotations"]
    ]


def test_commits_sharing_a_date_keep_their_order_on_the_date_axis():
    from ci.history.site import commit_info

    info = {c: commit_info.CommitInfo("2026-01-05 10:00:00", "rebased") for c in COMMITS[:3]}
    when = commit_info.axis_seconds(COMMITS, info)
    assert [when[c] - when[COMMITS[0]] for c in COMMITS] == [0, 1, 2, 3]  # a rebase's one date, one second apart
