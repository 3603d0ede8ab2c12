"""The kernel pages drawn cold in headless Chromium, at any history length and several machines (issue 48).

    PYTHONPATH=. python docs/data/pages_draw.py make --commits 10000 --gpu-machines 3 --work /tmp/draw
    PYTHONPATH=. python docs/data/pages_draw.py pages --commits 10000 --work /tmp/draw --site /tmp/draw/site-after
    PYTHONPATH=. python docs/data/pages_draw.py draw --site /tmp/draw/site-after --repeats 3 --out docs/data/x.json
    PYTHONPATH=. python docs/data/pages_draw.py shoot --site /tmp/draw/site-after --out docs/img --prefix kernel_20k

``make``: the summaries the history store would keep of a synthetic history of N commits on ``--gpu-machines``
GPU-like machines (tests/synthetic_summaries.py, one seed per machine, every machine on the first one's commit
dates: dated in the past, heavy-tailed gaps) and compile-only, made in memory (no git, no files: the pages are what
is measured), with their change points and drift guard (ci.history.trends.regressions) and each commit's date; all
pickled to ``<work>/history-<N>.pickle`` so that two checkouts' pages are drawn from the same data.

``pages``: this checkout's ci.history.site.kernel_page over that pickle (the site build's call), into ``--site``:
CPU seconds, every file's size.

``draw``: each kernel page (the newest commits, the whole history) and the kernels index served on 127.0.0.1 and
opened in a fresh headless Chromium with an empty profile (cold: nothing cached), at 1600x1200 and 1366x768, driven
through the DevTools protocol over a pipe. Per load: ``drawn_ms``, from the navigation's start to the first frame
painted after the load event with the plot drawn (plotly's graph div has its layout and its SVG); ``busy_ms``, the
page's main-thread task time (Performance.getMetrics TaskDuration, wall time of its tasks); ``browser_cpu_s``, user +
system CPU seconds of every Chromium process from its start to the page drawn (the browser's own start, ~0.3 CPU s on
about:blank, included: what the machine spent, which other processes' load disturbs least); bytes transferred (the HTML and the scripts it loads). The machine is shared:
compare the two checkouts' numbers taken in one run, and ``busy_ms`` before ``drawn_ms``.

``shoot``: screenshots of each page at both sizes (the window, as a reader first sees it), through the same protocol.
"""

from __future__ import annotations

import argparse
import base64
import functools
import http.server
import json
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))  # the synthetic histories are test support
SIZES = ((1600, 1200), (1366, 768))
PAGE_WINDOW = 200  # the site's default (ci.history.options.SiteOptions.page_window)
END = 1_796_000_000.0  # 2026-11-30: every synthetic history here ends before it (dated in the past, reproducible)

# What "drawn" means, evaluated in the page after its load event: a kernel page's plot has its layout and its SVG
# (plotly draws synchronously in the page's script), then two animation frames (the frame painted).
DRAWN = """new Promise(function (done) {
  function painted() { requestAnimationFrame(function () { requestAnimationFrame(function () {
    var g = document.getElementById('kernel-graph');
    done(JSON.stringify({drawn_ms: performance.now(), graph: !!g,
      points: g && g.data ? g.data.reduce(function (n, t) { return n + (t.x ? t.x.length : 0); }, 0) : 0,
      bytes: performance.getEntriesByType('resource').concat(performance.getEntriesByType('navigation'))
        .reduce(function (n, e) { return n + (e.encodedBodySize || 0); }, 0)}));
  }); }); }
  function ready() {
    var g = document.getElementById('kernel-graph');
    if (!g || (g._fullLayout && g.querySelector('.main-svg'))) painted(); else setTimeout(ready, 5);
  }
  if (document.readyState === 'complete') ready(); else addEventListener('load', ready);
})"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def handle(self):
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):
            pass


class Browser:
    """One headless Chromium with an empty profile, driven through the DevTools protocol over a pipe (fds 3 and 4)."""

    def __init__(self, size: tuple[int, int]):
        self.profile = tempfile.mkdtemp(prefix="draw-profile-")
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()
        # The child reads commands on fd 3 and writes on fd 4.
        self.proc = subprocess.Popen(
            [
                "chromium",
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                f"--user-data-dir={self.profile}",
                f"--window-size={size[0]},{size[1]}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            pass_fds=(3, 4),
            preexec_fn=functools.partial(_dup_pipes, to_browser_r, from_browser_w),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict] = []
        target = next(t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=target["targetId"], flatten=True)["sessionId"]
        for domain in ("Page", "Performance"):
            self.call(f"{domain}.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=size[0], height=size[1],
                  deviceScaleFactor=1, mobile=False)  # fmt: skip

    def _read(self) -> dict:
        while b"\0" not in self.buffer:
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed its pipe")
            self.buffer += chunk
        message, _, self.buffer = self.buffer.partition(b"\0")
        return json.loads(message)

    def call(self, method: str, session: bool = False, **params) -> dict:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def wait_event(self, method: str, timeout_s: float = 120) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for i, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._read())
        raise TimeoutError(method)

    def load(self, url: str) -> dict:
        """Navigate, wait for the page drawn (DRAWN), return its numbers and the page's main-thread task time."""
        self.events.clear()
        self.call("Page.navigate", session=True, url=url)
        self.wait_event("Page.loadEventFired")
        value = self.call("Runtime.evaluate", session=True, expression=DRAWN, awaitPromise=True, returnByValue=True)
        found = json.loads(value["result"]["value"])
        metrics = {m["name"]: m["value"] for m in self.call("Performance.getMetrics", session=True)["metrics"]}
        found["busy_ms"] = round(metrics["TaskDuration"] * 1000, 1)
        found["script_ms"] = round(metrics["ScriptDuration"] * 1000, 1)
        found["drawn_ms"] = round(found["drawn_ms"], 1)
        found["browser_cpu_s"] = round(self.cpu_seconds(), 2)
        return found

    def cpu_seconds(self) -> float:
        """User + system CPU seconds of the browser's processes so far (its start included): what the load cost the
        machine, whatever else ran beside it."""
        parents: dict[int, int] = {}
        ticks: dict[int, int] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            pid = int(stat.parent.name)
            parents[pid], ticks[pid] = int(fields[1]), int(fields[11]) + int(fields[12])
        tree, grew = {self.proc.pid}, True
        while grew:
            more = {pid for pid, parent in parents.items() if parent in tree} - tree
            tree |= more
            grew = bool(more)
        return sum(ticks.get(pid, 0) for pid in tree) / os.sysconf("SC_CLK_TCK")

    def screenshot(self, path: Path) -> None:
        """The window as a reader first sees it."""
        shot = self.call("Page.captureScreenshot", session=True, format="png")
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self.to_browser, self.from_browser):
            os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)


def _dup_pipes(read_end: int, write_end: int) -> None:
    os.dup2(read_end, 3)
    os.dup2(write_end, 4)


def _serve(site: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def _pages(site: Path) -> list[str]:
    return ["kernels/index.html", *sorted(str(p.relative_to(site)) for p in (site / "kernels").glob("*.html")
                                          if p.name != "index.html")]  # fmt: skip


def make(commits: int, gpu_machines: int, work: Path) -> None:
    import synthetic_history as synthetic
    from synthetic_summaries import summaries as synthetic_summaries

    from ci.history.asv_results import store
    from ci.history.site import commit_info
    from ci.history.trends import regressions

    started = time.process_time()
    everything: dict = {}
    made: list[str] = []
    dates: dict[str, int] = {}
    for number in range(gpu_machines):
        spec = synthetic.Spec(
            commits=commits, seed=number, gpu_machine=f"synthetic-gpu{number}", compile_only=number == 0, end=END
        )
        made, summaries = synthetic_summaries(spec)
        for machine, files in summaries.items():
            for summary in files:
                summary["date"] = dates.setdefault(summary["commit"], summary["date"])  # the first machine's dates
            everything[machine] = files
    history = store.history(everything, {c: i for i, c in enumerate(made)})
    kept = store.Store(None)
    try:
        checks = regressions.all_checks(history, kept)
    finally:
        kept.close()
    info = commit_info.from_summaries(everything)
    out = work / f"history-{commits}.pickle"
    with open(out, "wb") as f:
        pickle.dump({"history": history, "checks": checks, "info": info}, f, protocol=pickle.HIGHEST_PROTOCOL)
    print(
        f"{commits} commits x {gpu_machines} GPU machines + compile-only: {time.process_time() - started:.0f} CPU s, {out}"
    )


def pages(commits: int, work: Path, site: Path) -> dict:
    from ci.history.site import kernel_page

    with open(work / f"history-{commits}.pickle", "rb") as f:
        data = pickle.load(f)
    shutil.rmtree(site, ignore_errors=True)
    started = time.process_time()
    files = kernel_page.publish_history(site, data["history"], data["checks"], PAGE_WINDOW, "pages_draw.py",
                                        info=data["info"])  # fmt: skip
    row = {
        "commits": commits,
        "kernel_pages_cpu_s": round(time.process_time() - started, 1),
        "files_mb": {str(p.relative_to(site)): round(p.stat().st_size / 1e6, 3) for p in sorted(files)},
    }
    print(json.dumps(row, indent=1))
    return row


def draw(site: Path, repeats: int, only: list[str] | None) -> dict:
    server, base = _serve(site)
    rows = []
    try:
        for page in only or _pages(site):
            for size in SIZES:
                samples = []
                for _ in range(repeats):
                    browser = Browser(size)  # a fresh browser and profile: a cold load
                    try:
                        samples.append(browser.load(f"{base}/{page}"))
                    finally:
                        browser.close()
                row = {
                    "page": page,
                    "window": f"{size[0]}x{size[1]}",
                    "drawn_ms_median": statistics.median(s["drawn_ms"] for s in samples),
                    "busy_ms_median": statistics.median(s["busy_ms"] for s in samples),
                    "browser_cpu_s_median": statistics.median(s["browser_cpu_s"] for s in samples),
                    "bytes": samples[0]["bytes"],
                    "points": samples[0]["points"],
                    "samples": samples,
                }
                rows.append(row)
                print(f"{page} {row['window']}: drawn {row['drawn_ms_median']:.0f} ms, busy "
                      f"{row['busy_ms_median']:.0f} ms, browser {row['browser_cpu_s_median']:.2f} CPU s, "
                      f"{row['bytes'] / 1e6:.2f} MB, {row['points']} points",
                      flush=True)  # fmt: skip
    finally:
        server.shutdown()
    return {"site": str(site), "load_average": os.getloadavg(), "rows": rows}


def shoot(site: Path, out: Path, prefix: str, only: list[str] | None) -> None:
    server, base = _serve(site)
    out.mkdir(parents=True, exist_ok=True)
    try:
        for page in only or _pages(site):
            for size in SIZES:
                browser = Browser(size)
                try:
                    browser.load(f"{base}/{page}")
                    name = f"{prefix}_{Path(page).stem.replace('-', '_')}_{size[0]}x{size[1]}.png"
                    browser.screenshot(out / name)
                    print(out / name)
                finally:
                    browser.close()
    finally:
        server.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("make", "pages", "draw", "shoot"))
    parser.add_argument("--commits", type=int, default=10_000)
    parser.add_argument("--gpu-machines", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/draw"))
    parser.add_argument("--site", type=Path)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--page", action="append", help="only this page (relative to the site); repeatable")
    parser.add_argument("--out", type=Path, help="draw: the JSON record; shoot: the folder")
    parser.add_argument("--prefix", default="kernel")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    if args.step == "make":
        make(args.commits, args.gpu_machines, args.work)
    elif args.step == "pages":
        record = pages(args.commits, args.work, args.site)
        if args.out:
            args.out.write_text(json.dumps(record, indent=1) + "\n")
    elif args.step == "draw":
        record = draw(args.site, args.repeats, args.page)
        record["command"] = " ".join(sys.argv)
        record["when"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        if args.out:
            args.out.write_text(json.dumps(record, indent=1) + "\n")
    else:
        shoot(args.site, args.out or REPO / "docs" / "img", args.prefix, args.page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
