"""Render the triton_dot_scaled kernel page from the H200 history in docs/data/h200_history/ and screenshot it.

    python docs/data/render_h200_kernel_page.py    # writes docs/img/h200_kernel_page.png (needs Debian's chromium)

The results are the main job's on exp/history (docs/data/h200_history.sh, 2026-12-02): 12 commits, a +1% step
at c4 and +3% at c9. The page is the one every `asv publish` writes (ci.history.site.kernel_page), drawn here again
from the committed results so that the picture can be checked against the data.
"""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ci.history.site import kernel_page

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs/data/h200_history/asv/results"
SHOT = ROOT / "docs/img/h200_kernel_page.png"

chromium = shutil.which("chromium")
if chromium is None:
    sys.exit("render_h200_kernel_page: Debian's chromium is needed (apt-get install chromium)")
# asv passes its revisions (commit -> order) when it publishes; here they come from the branch's log, newest
# first (the synthetic commits share one commit date, so the results files alone cannot order them).
short = [line.split()[0] for line in (ROOT / "docs/data/h200_history/exp_history.txt").read_text().splitlines()][::-1]
full = {}
for path in (RESULTS / "vm-nvidia-h200").glob("*.json"):
    if path.name != "machine.json":
        commit = json.loads(path.read_text())["commit_hash"]
        full[commit[:7]] = commit
revisions = {full[s]: i for i, s in enumerate(short) if s in full}
with tempfile.TemporaryDirectory() as tmp:
    html = Path(tmp) / "html"
    results = Path(tmp) / "results"  # a copy: the history store keeps its cache beside the folder it reads
    shutil.copytree(RESULTS, results)
    kernel_page.publish(html, results, revisions)
    page = html / "kernels" / "triton_dot_scaled.html"
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={tmp}/profile",
            "--virtual-time-budget=15000",
            "--window-size=1400,1700",
            f"--screenshot={SHOT}",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=180,
    )
print(f"render_h200_kernel_page: wrote {SHOT}")
