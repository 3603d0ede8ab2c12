"""The main job with nothing new on a long synthetic history dated in the past (issue 39): a benchmark, not a test.

    PYTHONPATH=. WT=$PWD python docs/data/history_nothing_new.py WORK ASV_ENV_TEMPLATE [COMMITS]   # default 10000

In WORK: a clone of this checkout's HEAD as its main, COMMITS synthetic commits and their results on asv-results
(tests/synthetic_history.py), asv's environments copied from ASV_ENV_TEMPLATE (a ``.asv/env`` that tests/conftest.py's
``asv_env_template`` made, as tests/test_asv_suite.copy_asv_envs copies it). Then, each under /usr/bin/time,
``--machine synthetic-h200 --no-publish``: ``--tracks cpu`` (nothing new: the first run, bringing the branch in),
``--tracks gpu`` once with the newest three commits' two CPU timings measured (not nothing new), ``--tracks gpu``
and ``--tracks cpu`` again (nothing new). Exit codes, statuses, wall/CPU seconds, peak RSS and step seconds to
WORK/noop.json (docs/data/history_nothing_new_10k.json: 2026-12-04).
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

WT = Path(os.environ["WT"])
sys.path[:0] = [str(WT), str(WT / "tests")]
import synthetic_history as synthetic  # noqa: E402 (the worktree goes on the path first)

work, template = Path(sys.argv[1]), Path(sys.argv[2])
n = int(sys.argv[3]) if len(sys.argv) > 3 else 10000
clone = work / f"n{n}"
shutil.rmtree(clone, ignore_errors=True)
subprocess.run(["git", "clone", "--quiet", "--no-local", str(WT), str(clone)], check=True)
subprocess.run(["git", "-C", str(clone), "remote", "remove", "origin"], check=True)
subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", "-B", "main"], check=True)
t = time.monotonic()
synthetic.make_history(clone, synthetic.Spec(commits=n))
print("generate", round(time.monotonic() - t), flush=True)
shutil.copytree(template, clone / ".asv" / "env", symlinks=True)
env = {**os.environ, "PYTHONPATH": str(clone), "HOME": str(work / "home"), "MXFP4_STACK_PYTHON": sys.executable}
env.pop("TRITON_INTERPRET", None)
env.pop("GITHUB_STEP_SUMMARY", None)
(work / "home").mkdir(exist_ok=True)
job = [sys.executable, "-m", "ci.history", "--machine", synthetic.Spec(n).gpu_machine]
out = {"commits": n, "load_before": os.getloadavg()}
for name, args in (
    ("noop_cpu", ["--tracks=cpu", "--no-publish"]),
    ("setup_gpu", ["--tracks=gpu", "--no-publish", "--bench=GemmOnCpu\\.track_time\\('torch_dequant:bf16'"]),
    ("noop_gpu", ["--tracks=gpu", "--no-publish"]),
    ("noop_cpu_again", ["--tracks=cpu", "--no-publish"]),
):
    report = work / f"{name}.json"
    t, c = time.monotonic(), os.times()
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%U %S %M", "-o", str(work / f"{name}.time"), *job, *args, f"--json={report}"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
    )
    (work / f"{name}.log").write_text(done.stdout + done.stderr)
    user, system, rss = (work / f"{name}.time").read_text().split()[-3:]
    data = json.loads(report.read_text()) if report.exists() else {}
    out[name] = {
        "exit": done.returncode,
        "wall_s": round(time.monotonic() - t, 1),
        "cpu_s": round(float(user) + float(system), 1),
        "peak_rss_mib": round(int(rss) / 1024),
        "status": sorted(set(data.get("status", {}).values())),
        "nothing_new": data.get("nothing_new"),
        "steps": data.get("step_seconds"),
    }
    print(name, json.dumps(out[name]), flush=True)
out["load_after"] = os.getloadavg()
(work / "noop.json").write_text(json.dumps(out, indent=1))
