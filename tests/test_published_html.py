"""The main job end to end on a fresh CPU-only clone, and its HTML checked in a real browser.

``python -m ci.main_job`` runs over two commits of a temporary copy of this repository (one CPU
timing and the register history, to stay quick), publishes, and the page is served on 127.0.0.1 to
headless Chromium (Debian's ``chromium``). A probe page loads asv's index.html in a same-origin
iframe and reports what flot drew: the series, the finite data points, the inked canvas pixels.
"""

from __future__ import annotations

import functools
import http.server
import json
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from test_asv_suite import CPU_TIME_BENCHMARK, asv_env, commit_change, make_project, markdown_rows

CHROMIUM = shutil.which("chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
RESOURCE_BENCHMARK = r"CompiledResources\.track_registers\('(flydsl_gfx950_4wave|triton_dot_scaled)'"

PROBE = b"""<!doctype html><html><body><pre id="result">pending</pre>
<iframe id="asv" width="1200" height="800"></iframe>
<script>
const frame = document.getElementById('asv');
frame.src = 'index.html' + location.hash;
function report(value) { document.getElementById('result').textContent = JSON.stringify(value); }
function check() {
  try {
    const w = frame.contentWindow, $ = w.jQuery;
    const plot = $ && $('#main-graph').data('plot');
    if (plot) {
      const series = plot.getData();
      const points = series.reduce((n, s) => n + s.data.filter(p => p && p[1] !== null && isFinite(p[1])).length, 0);
      const canvas = $('#main-graph canvas.flot-base')[0];
      let inked = 0;
      if (canvas) {
        const px = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
        for (let i = 3; i < px.length; i += 4) if (px[i]) inked++;
      }
      report({series: series.length, points: points, inked: inked, page: w.location.pathname});
      return;
    }
    if (w.location.pathname.endsWith('error.html')) { report({error: 'asv could not load its libraries'}); return; }
  } catch (e) { report({error: String(e)}); return; }
  setTimeout(check, 100);
}
check();
</script></body></html>"""


class _Handler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        if self.path.startswith("/__probe__.html"):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(PROBE)))
            self.end_headers()
            self.wfile.write(PROBE)
            return
        super().do_GET()

    def log_message(self, *args):
        pass

    def handle(self):
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):  # the browser closing early is not an error here
            pass


def probe_graph(html_dir: Path, benchmark: str, profile: Path) -> dict:
    """What Chromium's flot drew for ``benchmark`` on the published page."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Handler, directory=str(html_dir)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/__probe__.html#{benchmark}"
        proc = subprocess.run(
            [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=20000", "--dump-dom", url],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        server.shutdown()
        server.server_close()
    match = re.search(r'<pre id="result">([^<]*)</pre>', proc.stdout)
    assert match, f"no probe result in Chromium's DOM (exit {proc.returncode}): {proc.stderr[-2000:]}"
    text = match.group(1).replace("&quot;", '"')
    return {"raw": text} if text == "pending" else json.loads(text)


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_main_job_publishes_html_whose_graphs_render_with_data_points(tmp_path):
    repo = make_project(tmp_path)
    second = commit_change(repo, "pyproject.toml", "\n", "a second commit")
    # A fresh clone, as CI and a new machine have it.
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--branch", "main", str(repo), str(clone)], check=True)
    report_path = tmp_path / "report.json"
    job = subprocess.run(
        [
            sys.executable,
            "-m",
            "ci.main_job",
            "--commits=2",
            f"--bench={CPU_TIME_BENCHMARK}",
            f"--bench={RESOURCE_BENCHMARK}",
            f"--json={report_path}",
        ],
        cwd=clone,
        env=asv_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-5000:]
    report = json.loads(report_path.read_text())
    html_dir = clone / ".asv" / "html"
    assert report["html"] == str(html_dir / "index.html") and f"HTML: {html_dir / 'index.html'}" in job.stderr
    assert report["html_offline"], "the page would need public CDNs to draw anything"
    assert [c[:8] for c in report["commits"]] == [c[:8] for c in report["tables"]["resources"]["columns"]]
    assert second[:8] == report["commits"][-1][:8]
    registers = {k: v for k, v in report["tables"]["resources"]["rows"].items() if k.startswith("registers(")}
    assert {"registers(flydsl_gfx950_4wave, gfx950)", "registers(triton_dot_scaled, sm_90)"} <= set(registers)
    assert all(v > 0 for row in registers.values() for v in row.values()), registers
    summary_rows = {row[0]: row[1:] for row in markdown_rows(job.stdout)}  # the Markdown summary
    assert summary_rows["registers(triton_dot_scaled, sm_90)"] == [
        f"{v:.4g}" for v in report["tables"]["resources"]["rows"]["registers(triton_dot_scaled, sm_90)"].values()
    ]

    register_points = sum(1 for row in registers.values() for v in row.values() if v is not None and v == v)  # not NaN
    assert register_points >= 4
    for benchmark, points in (
        ("bench_resources.CompiledResources.track_registers", register_points),  # (kernel, arch) x 2 commits
        ("bench_gemm.GemmOnCpu.track_time", 2),  # torch_dequant on one CPU shape x 2 commits
    ):
        drawn = probe_graph(html_dir, benchmark, tmp_path / f"chromium-{benchmark}")
        assert "error" not in drawn and "raw" not in drawn, drawn
        assert drawn["points"] == points, drawn
        assert drawn["inked"] > 1000, drawn  # lines and points were drawn on the canvas


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_the_probe_fails_on_a_page_that_cannot_draw(tmp_path):
    """The check can fail: asv's own page, which loads its libraries from CDNs unreachable here."""
    from asv import __file__ as asv_file

    html = tmp_path / "html"
    shutil.copytree(Path(asv_file).parent / "www", html)
    (html / "index.json").write_text("{}")
    drawn = probe_graph(html, "bench_gemm.GemmOnCpu.track_time", tmp_path / "chromium")
    assert "points" not in drawn, drawn
