#!/usr/bin/env bash
# Issue 20's "Done when" on the lent H200: a synthetic history (docs/data/make_history_branch.py: +1% at c4, +3%
# more at c9, speed-neutral launch-path changes, docs/comment-only copies) through the main job (change points,
# drift guard), then python -m ci.bisect --from-change-point on each regression change point.
# Run from the repository root with, in .dev/ (an ignored folder carried to the device):
#   .dev/repo.bundle  a git bundle with the branch $BASE (default main) holding this script's commit;
#   .dev/whl/*.whl    asv, asv-runner, gitpython, gitdb, smmap, virtualenv 20.29.3, distlib, platformdirs, json5,
#                     pympler, importlib-metadata < 8.8, zipp: installed with --target into $SITE (/work/shared/H200.md);
#   .dev/whl/env/     asv-runner (asv installs it into each environment), build, pyproject-hooks, packaging, wheel,
#                     setuptools: only for asv's environments
#                     (--wheelhouse: PIP_FIND_LINKS, PIP_NO_INDEX), never on the image's path (a newer packaging
#                     there shadows the image's).
# Everything comes back as ONE file, $OUT/h200_history.tar.gz (the device returns at most 8). The whole script keeps
# to $BUDGET_S seconds (default 540: the device's per-call limit is 600): every step runs under `timeout` with what
# is left. The main job exits 1 on the drift guard: expected here, the script goes on.
# On a CPU (dry run): HISTORY_DEVICE=cpu times GemmOnCpu at a CPU shape (change points are not checked there).
set -u -o pipefail
export PYTHONUNBUFFERED=1
T0=$(date +%s)
BUDGET_S=${BUDGET_S:-540}
BASE=${BASE:-main}
COMMITS=${COMMITS:-12}
SITE=${SITE:-/tmp/site}
WORK=${WORK:-/tmp/r}
LOGS=${LOGS:-/tmp/h200_history}
OUT=${OUT:-/tmp/out}
WHL=$(pwd)/.dev/whl
if [ "${HISTORY_DEVICE:-gpu}" = cpu ]; then  # the Triton kernels need a GPU (or the interpreter): time the torch peer
  BENCH="GemmOnCpu\\.track_time\\('${CPU_KERNEL_CONFIG:-torch_dequant:bf16}', '${CPU_SHAPE:-cpu_m00128_n00128_k02048}'\\)"
else
  BENCH="GemmOnGpu\\.track_time\\('triton_dot_scaled:m128_n128_k128_w8_s3', 'square_m08192_n08192_k08192'\\)"
fi
GATE_ARGS=(--thresholds ci/speed_thresholds_h200.json --max-minutes 2)

# shellcheck source=docs/data/h200_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/h200_lib.sh"  # left, step
finish() {
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv > "$LOGS/gpu_after.csv"
  if [ -d "$WORK/.asv" ]; then
    mkdir -p "$LOGS/asv"
    cp "$WORK/.asv/main_job.log" "$LOGS/asv/" 2>/dev/null
    cp -r "$WORK/.asv/results" "$LOGS/asv/results" 2>/dev/null
    cp -r "$WORK/.asv/html" "$LOGS/asv/html" 2>/dev/null
  fi
  git -C "$WORK" log --format='%h %s' "$BASE..exp/history" > "$LOGS/exp_history.txt" 2>/dev/null
  mkdir -p "$OUT"
  tar -C "$(dirname "$LOGS")" -czf "$OUT/h200_history.tar.gz" "$(basename "$LOGS")"
  echo "total wall $(( $(date +%s) - T0 )) s; $OUT/h200_history.tar.gz $(du -h "$OUT/h200_history.tar.gz" | cut -f1)"
  cat "$LOGS/runs.txt"
}

rm -rf "$LOGS" && mkdir -p "$LOGS"
trap finish EXIT
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv | tee "$LOGS/gpu_before.csv"

# a. the tools, the clone, the branch
step install 90 python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$WHL"/*.whl > "$LOGS/install.log" 2>&1 || exit 2
export PYTHONPATH=$SITE
rm -rf "$WORK" && git clone -q -b "$BASE" .dev/repo.bundle "$WORK" && cd "$WORK" || exit 2
git config user.email exp@example.invalid && git config user.name exp
step make_history_branch 60 python3 docs/data/make_history_branch.py | tee "$LOGS/make_history_branch.txt" || exit 2
git rev-parse -q --verify main >/dev/null || git branch main  # asv.conf.json's branch (a dry run's bundle may lack it)
# asv publish draws the branches asv.conf.json names: exp/history too, in this scratch clone only (restored after the job)
sed -i 's#"branches": \["main"\]#"branches": ["main", "exp/history"]#' asv.conf.json && grep -q '"exp/history"' asv.conf.json || exit 2
export PYTHONPATH=$WORK:$SITE
MXFP4_STACK_PYTHON=$(command -v python3)  # asv's environments link the image's torch (asv_bench/link_stack.py)
export MXFP4_STACK_PYTHON

# b. the main job over exp/history's commits, the tracked config only
MAIN_JSON=$LOGS/main_job.json
step main_job 360 python3 -m ci.history --branch exp/history --commits "$COMMITS" --tracks gpu --bench "$BENCH" \
  --wheelhouse "$WHL/env" --json "$MAIN_JSON" > "$LOGS/main_job.md" 2> "$LOGS/main_job.stderr"
echo "main job exit $? (1 expected: the drift guard)"; tail -n 40 "$LOGS/main_job.md"
git checkout -q asv.conf.json  # the speed gate below sees a clean tree

# c. what it found: the commits measured or copied, change points, the drift guard
[ -f "$MAIN_JSON" ] || { echo "no main-job JSON: nothing to bisect"; exit 2; }
python3 - "$MAIN_JSON" "$BASE" <<'EOF' | tee "$LOGS/found.txt"
import json, subprocess, sys
report = json.load(open(sys.argv[1]))
names = dict(line.split(" ", 1) for line in subprocess.run(["git", "log", "--format=%H %s", f"{sys.argv[2]}..exp/history"],
                                                           capture_output=True, text=True).stdout.splitlines())
name = lambda sha: (names.get(sha) or "?").split(":")[0]
copies = {c: o for cost in (report.get("cost") or {}).values() for c, o in (cost.get("identical") or {}).items()}
for commit in report.get("commits", []):
    copied = copies.get(commit)
    print(f"{name(commit):4} {commit[:12]} {report['status'].get(commit)}" + (f" (copy of {name(copied)})" if copied else ""))
print("cost:", json.dumps(report.get("cost")))
history = report.get("history") or {}
if history.get("not_checked"):
    print("history not checked:", history["not_checked"])
for change in history.get("change_points", []):
    print(f"change point: {name(change['first_after'])} ({name(change['last_before'])}..{name(change['first_after'])}):",
          change["change"]["direction"], f"{change['change']['relative_change']:+.2%}", change["change"]["interval"])
for line in history.get("drift_failed", []):
    print("drift guard FAILS:", line)
for drift in history.get("drift", []):
    print(f"drift: drop {drift['drop']:+.2%} vs best {name(drift['best'])}, threshold {drift['threshold']:.2%}, failed {drift['failed']}")
regressions = [c for c in history.get("change_points", []) if c["change"]["direction"] == "regression"]
open(sys.argv[1] + ".regressions", "w").write(str(len(regressions)))
EOF

# d. each regression change point bisected with the speed gate (its own JSON, Markdown and log)
N=$(cat "$MAIN_JSON.regressions" 2>/dev/null || echo 0)
for i in $(seq 1 "$N"); do
  share=$(( ($(left) - 25) / (N - i + 1) )); [ "$share" -gt 200 ] && share=200
  step "bisect_$i" "$share" python3 -m ci.bisect --from-change-point "$MAIN_JSON" --index "$i" --json "$LOGS/bisect_$i.json" \
    -- "${GATE_ARGS[@]}" > "$LOGS/bisect_$i.md" 2> "$LOGS/bisect_$i.log"
  python3 -c "
import json, subprocess, sys
record = json.load(open(sys.argv[1]))
culprit = record.get('culprit') or ''
subject = subprocess.run(['git', 'log', '-1', '--format=%s', culprit], capture_output=True, text=True).stdout.strip() if culprit else ''
print(f\"bisect $i: {record.get('outcome')}, culprit {culprit[:12]} {subject[:60]}, {record.get('comparisons')} comparison(s)\")
" "$LOGS/bisect_$i.json" 2>/dev/null || { echo "bisect $i: no record"; tail -n 5 "$LOGS/bisect_$i.log"; }
done
