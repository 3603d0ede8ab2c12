"""The main job end to end on a fresh CPU-only clone, its results branch, and its HTML in a real browser.

``python -m ci.history --push-results`` runs over two commits of a temporary copy of this repository
(one CPU timing, one GPU shape that is n/a here, the register history: quick), starting from a
truncated and an invalid results file, pushing to a bare remote. The page is served on 127.0.0.1
to headless Chromium (Debian's ``chromium``): a probe page loads asv's index.html in a same-origin
iframe and reports what flot drew (series, finite points, inked canvas pixels) and what the notes
panel beside the graph says; the page is also opened as a file, and published again by plain asv.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import browser
import pytest
from browser import CHROMIUM, CHROMIUM_FLAGS
from test_asv_suite import CPU_TIME_BENCHMARK, asv, asv_env, commit_change, copy_asv_envs, make_project
from test_results_branch import results_file

from ci.history.site import offline_html

RESOURCE_BENCHMARK = r"CompiledResources\.track_registers\('triton_dot_scaled'"

PROBE = b"""<!doctype html><html><body><pre id="result">pending</pre>
<iframe id="asv" width="1200" height="800"></iframe>
<script>
const frame = document.getElementById('asv');
frame.src = 'index.html' + location.hash;
function report(value) { document.getElementById('result').textContent = JSON.stringify(value); }
let looks = 0;
function check() {
  looks++;
  try {
    const w = frame.contentWindow, $ = w.jQuery;
    const plot = $ && $('#main-graph').data('plot');
    const noData = $ && $('#error').is(':visible');  // asv's "No data for this combination of filters"
    if (plot || noData) {
      let points = 0, inked = 0, series = 0;
      if (plot) {
        series = plot.getData().length;
        points = plot.getData().reduce(
          (n, s) => n + s.data.filter(p => p && p[1] !== null && isFinite(p[1])).length, 0);
        const canvas = $('#main-graph canvas.flot-base')[0];
        if (canvas) {
          const px = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
          for (let i = 3; i < px.length; i += 4) if (px[i]) inked++;
        }
      }
      const notes = w.document.getElementById('mxfp4-notes');
      if (!notes || notes.getAttribute('data-complete') !== '1') { setTimeout(check, 100); return; }
      if (points === 0 && !noData && looks < 80) { setTimeout(check, 100); return; }  // graph data still loading
      report({series: series, points: points, inked: inked, page: w.location.pathname, notes: notes.innerText});
      return;
    }
    if (w.location.pathname.endsWith('error.html')) { report({error: 'asv could not load its libraries'}); return; }
  } catch (e) { report({error: String(e)}); return; }
  setTimeout(check, 100);
}
check();
</script></body></html>"""


# What the regressions page says about itself (ci/history/site/asv_html_notes.js), once asv has drawn it.
REGRESSIONS_PROBE = b"""<!doctype html><html><body><pre id="result">pending</pre>
<iframe id="asv" width="1200" height="800" src="index.html#/regressions"></iframe>
<script>
const frame = document.getElementById('asv');
function check() {
  try {
    const why = frame.contentWindow.document.getElementById('mxfp4-regressions-why');
    if (why) { document.getElementById('result').textContent = why.innerText; return; }
  } catch (e) { document.getElementById('result').textContent = 'error: ' + e; return; }
  setTimeout(check, 100);
}
check();
</script></body></html>"""
PROBES = {"/__probe__.html": PROBE, "/__regressions__.html": REGRESSIONS_PROBE}


def served_dom(html_dir: Path, path: str, profile: Path) -> str:
    """Chromium's DOM of ``path`` served from ``html_dir`` on 127.0.0.1 (probe pages included)."""
    proc = browser.served_dom(html_dir, path, profile, probes=PROBES, budget_ms=20000)
    assert proc.stdout, f"no DOM from Chromium (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return proc.stdout


def probe_graph(html_dir: Path, benchmark: str, profile: Path) -> dict:
    """What Chromium's flot drew for ``benchmark`` on the published page."""
    dom = served_dom(html_dir, f"__probe__.html#{benchmark}", profile)
    match = re.search(r'<pre id="result">([^<]*)</pre>', dom)
    assert match, f"no probe result in Chromium's DOM: {dom[-2000:]}"
    text = match.group(1).replace("&quot;", '"')
    return {"raw": text} if text == "pending" else json.loads(text)


ENV_NAME = f"virtualenv-py{sys.version_info[0]}.{sys.version_info[1]}-VIRTUALENV_SYSTEM_SITE_PACKAGEStrue"
GPU_SHAPE_ON_CPU = r"GemmOnGpu\.track_time\('torch_dequant:bf16', 'square_m08192"


def chromium_dom(url: str, profile: Path) -> str:
    proc = subprocess.run(
        [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=10000", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.stdout


@pytest.fixture(scope="module")
def published(tmp_path_factory, asv_env_template):
    """The main job on a fresh clone whose results directory holds a truncated and an invalid results file,
    pushing to a bare remote: its report, output, clone and remote."""
    tmp_path = tmp_path_factory.mktemp("published")
    repo = make_project(tmp_path)
    commit_change(repo, "pyproject.toml", "\n", "a second commit")
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(remote)], check=True)
    clone = tmp_path / "clone"  # a fresh clone, as CI and a new machine have it
    subprocess.run(["git", "clone", "-q", "--branch", "main", str(remote), str(clone)], check=True)
    copy_asv_envs(asv_env_template, clone)
    newest, oldest = subprocess.run(
        ["git", "rev-list", "main"], cwd=clone, capture_output=True, text=True
    ).stdout.split()
    seeded = clone / ".asv" / "results" / "ci-test"
    seeded.mkdir(parents=True)
    truncated = results_file("ci-test", oldest, {"bench_gemm.GemmOnCpu.track_time": 0.01})
    (seeded / f"{oldest[:8]}-{ENV_NAME}.json").write_bytes(truncated[: len(truncated) // 2])  # killed mid-write
    (seeded / f"{newest[:8]}-{ENV_NAME}.json").write_text("this is not JSON")
    report_path = tmp_path / "report.json"
    job = subprocess.run(
        [
            sys.executable,
            "-m",
            "ci.history",
            "--commits=2",
            "--machine=ci-test",
            f"--bench={CPU_TIME_BENCHMARK}",
            f"--bench={GPU_SHAPE_ON_CPU}",
            f"--bench={RESOURCE_BENCHMARK}",
            f"--json={report_path}",
            "--push-results",
        ],
        cwd=clone,
        env=asv_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-5000:]
    return {
        "job": job,
        "report": json.loads(report_path.read_text()),
        "clone": clone,
        "remote": remote,
        "tmp": tmp_path,
    }


@pytest.mark.slow
def test_unreadable_results_are_moved_aside_and_every_commit_is_still_measured(published):
    report, job = published["report"], published["job"]
    moved = sorted(Path(q["path"]).name[:8] for q in report["quarantined"])
    assert moved == sorted(c[:8] for c in report["commits"]), report["quarantined"]
    for q in report["quarantined"]:
        assert f"quarantined {published['clone'] / '.asv' / 'results' / q['path']}" in job.stderr
        assert Path(q["moved_to"]).is_file()
    # The second commit changes only pyproject.toml: its code is identical, so its results are the first's, copied
    # in the same run (issue 39: "identical code", no longer reported as "measured"); both have results.
    assert sorted(report["status"].values()) in (["identical code", "measured"], ["measured", "measured"]), report[
        "status"
    ]
    assert "build or install failed" not in job.stdout and report["harness_problems"] == []


@pytest.mark.slow
def test_results_reach_the_results_branch_with_their_records(published):
    remote, report = published["remote"], published["report"]
    log = subprocess.run(
        ["git", "log", "--format=%s", "asv-results"], cwd=remote, capture_output=True, text=True
    ).stdout
    # --tracks all (the default): the timings under this machine, the compile-only counts under "compile-only", one
    # commit.
    assert log.splitlines() == [
        f"ci-test, compile-only: 2 commits ({', '.join(c[:8] for c in reversed(report['commits']))}), "
        f"main job {report['job']}"
    ]
    files = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", "asv-results"], cwd=remote, capture_output=True, text=True
    )
    names = set(files.stdout.split())
    for commit in report["commits"]:
        assert f"results/ci-test/{commit[:8]}-{ENV_NAME}.json" in names
        assert f"results/ci-test/{commit[:8]}-{ENV_NAME}.records" in names
    # One measurement, both numbers: TFLOPS in the summary come from the timed samples' median.
    for commit in report["commits"]:
        (record,) = report["measurements"][commit].values()
        assert record["tflops"] == pytest.approx(2 * 256 * 256 * 1024 / record["median_s"] / 1e12)
    assert "TFLOPS" in published["job"].stdout


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_served_html_draws_the_graphs_and_says_why_an_empty_one_is_empty(published):
    report, html_dir, tmp = published["report"], published["clone"] / ".asv" / "html", published["tmp"]
    index = (html_dir / "index.html").read_text()
    assert not re.findall(r'<(?:script|link)\b[^>]*(?:src|href)="https?://', index), "a CDN link is left"
    registers = {k: v for k, v in report["resources"][report["commits"][-1]].items() if k.startswith("registers(")}
    assert set(registers) == {"registers(triton_dot_scaled, gfx950)", "registers(triton_dot_scaled, sm_90)"}
    assert all(v > 0 for v in registers.values()), registers
    cpu = "bench_gemm.GemmOnCpu.track_time?p-kernel_config='torch_dequant:bf16'&p-shape='cpu_m00256_n00256_k01024'"
    for benchmark, points in (
        ("bench_resources.CompiledResources.track_registers?p-kernel='triton_dot_scaled'", 4),  # 2 archs x 2 commits
        (cpu, 2),
    ):
        drawn = probe_graph(html_dir, benchmark, tmp / f"chromium-{benchmark[:40]}")
        assert "error" not in drawn and "raw" not in drawn, drawn
        assert drawn["points"] == points, drawn
        assert drawn["inked"] > 1000, drawn  # lines and points were drawn on the canvas
    notes = probe_graph(html_dir, cpu, tmp / "chromium-notes")["notes"]
    assert "TFLOPS" in notes and "off the regressions page" in notes, notes
    tflops = report["measurements"][report["commits"][-1]]
    assert f"{next(iter(tflops.values()))['tflops']:.4g}" in notes, notes
    empty = probe_graph(html_dir, "bench_gemm.GemmOnGpu.track_time", tmp / "chromium-gpu")
    assert empty["points"] == 0
    assert "No data on ci-test: n/a: no GPU on this machine" in empty["notes"], empty


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_on_a_machine_without_a_gpu_the_tflops_pages_say_where_gpu_history_comes_from(published):
    html_dir, tmp = published["clone"] / ".asv" / "html", published["tmp"]
    assert 'href="kernels/index.html"' in (html_dir / "index.html").read_text()  # asv's navigation bar links them
    index = served_dom(html_dir, "kernels/index.html", tmp / "chromium-kernels")
    assert "TFLOPS by kernel (higher is better)" in index and "GPU history comes from the GPU runner" in index
    page = served_dom(html_dir, "kernels/torch_dequant.html", tmp / "chromium-kernel")
    assert 'class="main-svg"' in page, "plotly drew nothing"
    assert "GPU history comes from the GPU runner" in page and "asv-results" in page
    assert "CPU: not the GPU history" in page  # the CPU timing's line is marked CPU
    assert "this machine has no GPU" in page
    assert 'class="regression"' not in page


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_the_empty_regressions_page_says_why(published):
    dom = served_dom(
        published["clone"] / ".asv" / "html", "__regressions__.html", published["tmp"] / "chromium-regressions"
    )
    why = re.search(r'<pre id="result">([^<]*)</pre>', dom).group(1)
    assert "No regression listed: none detected over 2 commits on ci-test" in why, why
    assert "No GPU timings in these results" in why and "GPU history comes from the GPU runner" in why, why
    assert "a TFLOPS gain is a drop in seconds and is never listed here" in why, why


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_opened_as_a_file_the_page_says_how_to_view_it(published):
    dom = chromium_dom(
        (published["clone"] / ".asv" / "html" / "index.html").as_uri(), published["tmp"] / "chromium-file"
    )
    assert "This page needs a web server" in dom and "asv preview" in dom
    assert "failed to load" not in dom  # not asv's "JavaScript dependencies failed to load" page


@pytest.mark.slow
def test_a_plain_asv_publish_leaves_no_cdn_link_either(published):
    clone = published["clone"]
    done = asv(clone, asv_env(published["tmp"] / "home"), "publish")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    index = (clone / ".asv" / "html" / "index.html").read_text()
    assert not re.findall(r'<(?:script|link)\b[^>]*(?:src|href)="https?://', index)
    assert (clone / ".asv" / "html" / "mxfp4" / "notes.js").is_file() and "mxfp4-file-notice" in index


def test_the_vendored_libraries_are_the_locked_bytes_with_their_licenses():
    assets = offline_html.locked_assets()
    assert offline_html.sha256_mismatches(assets) == []
    for asset in assets.values():
        assert re.fullmatch(r"[a-z0-9-]+@\d+\.\d+\.\d+", asset.package), asset
        assert (offline_html.VENDOR_DIR / asset.license).is_file(), asset
    pages = offline_html.kernel_page_assets()  # plotly.js's basic bundle, which the kernel pages load (issue 48)
    assert offline_html.sha256_mismatches(pages) == []
    for asset in pages.values():
        assert re.fullmatch(r"[a-z0-9.-]+@\d+\.\d+\.\d+", asset.package), asset
        assert (offline_html.VENDOR_DIR / asset.license).is_file(), asset
    committed = {p.name for p in offline_html.VENDOR_DIR.iterdir() if p.is_file()} - {offline_html.LOCK_FILE.name}
    assert committed == {a.file for a in [*assets.values(), *pages.values()]}, (
        "a vendored file without its row in lock.json, or the reverse"
    )
    assert sum((offline_html.VENDOR_DIR / a.file).stat().st_size for a in assets.values()) < 2_000_000
    assert sum((offline_html.VENDOR_DIR / a.file).stat().st_size for a in pages.values()) < 1_500_000


def test_asvs_own_page_is_pointed_at_the_vendored_libraries_and_an_altered_one_is_refused(tmp_path):
    from asv import __file__ as asv_file

    html = tmp_path / "html"
    shutil.copytree(Path(asv_file).parent / "www", html)
    replaced = offline_html.localize(html)
    index = (html / "index.html").read_text()
    assert set(replaced) == set(offline_html.locked_assets())
    assert not re.findall(r'<(?:script|link)\b[^>]*(?:src|href)="https?://', index), "a CDN link is left"
    for asset in offline_html.locked_assets().values():
        assert (html / "vendor" / asset.file).read_bytes() == (offline_html.VENDOR_DIR / asset.file).read_bytes()
    # jQuery's npm file is the CDN's byte for byte: the browser still checks it.
    assert re.search(r'src="vendor/jquery-jquery.min.js"[^>]*integrity="sha', index), index[:3000]

    altered = tmp_path / "vendor"
    shutil.copytree(offline_html.VENDOR_DIR, altered)
    (altered / "bootstrap-bootstrap.min.css").write_bytes(b"/* not the locked file */")
    fresh = tmp_path / "fresh"
    shutil.copytree(Path(asv_file).parent / "www", fresh)
    with pytest.raises(
        offline_html.AssetsUnavailable, match=r"bootstrap-bootstrap\.min\.css has sha256 [0-9a-f]{64}, not"
    ):
        offline_html.localize(fresh, vendor_dir=altered)
    assert "https://cdn.jsdelivr.net/npm/bootstrap" in (fresh / "index.html").read_text()  # left as asv wrote it


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_the_probe_fails_on_a_page_that_cannot_draw(tmp_path):
    """The check can fail: asv's own page, which loads its libraries from CDNs unreachable here."""
    from asv import __file__ as asv_file

    html = tmp_path / "html"
    shutil.copytree(Path(asv_file).parent / "www", html)
    (html / "index.json").write_text("{}")
    drawn = probe_graph(html, "bench_gemm.GemmOnCpu.track_time", tmp_path / "chromium")
    assert "points" not in drawn, drawn
