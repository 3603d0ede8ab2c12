#!/usr/bin/env bash
# Issue 21 item 3 and issue 18's last H200 case, on the lent H200 (docs/SPEED_GATE.md, "The history job on the H200"):
#   1. the main job's GPU track over main's tip, the full suite, asv's benchmarks forked from one process that
#      imported the suite (--launch-method forkserver): the GPU-runner seconds of one commit;
#   2. the same job over exp/docs-only (main's tip measured, the docs commit identical): 0 GPU seconds, a copy;
#   3. the main job over exp/wrong-at-8192 (the tracked config wrong only at 8192^3): recorded as failed;
#   4. the speed gate on exp/faster against exp/slow (an improvement), the verdict the first lease did not reach.
# Run from the repository root with .dev/ carried (the wheels and .dev/repo.bundle, as docs/data/h200_history.sh).
# Everything comes back as ONE file, $OUT/h200_history_cost.tar.gz; the script keeps to $BUDGET_S seconds.
set -u -o pipefail
export PYTHONUNBUFFERED=1
T0=$(date +%s)
BUDGET_S=${BUDGET_S:-560}
SITE=${SITE:-/tmp/site}
WORK=${WORK:-/tmp/rc}
LOGS=${LOGS:-/tmp/h200_history_cost}
OUT=${OUT:-/tmp/out}
WHL=$(pwd)/.dev/whl
TRACKED_8192="GemmOnGpu\\.track_time\\('triton_dot_scaled:m128_n128_k128_w8_s3', 'square_m08192_n08192_k08192'\\)"

# shellcheck source=docs/data/h200_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/h200_lib.sh"  # left, step
job() {  # job NAME CAP ARGS...: one main job, its Markdown, stderr, JSON and log kept under its name
  local name=$1 cap=$2; shift 2
  step "$name" "$cap" python3 -m ci.history --tracks gpu --no-publish --wheelhouse "$WHL/env" --json "$LOGS/$name.json" "$@" \
    > "$LOGS/$name.md" 2> "$LOGS/$name.stderr"
  cp .asv/main_job.log "$LOGS/$name.main_job.log" 2>/dev/null
  python3 - "$LOGS/$name.json" <<'EOF' | tee -a "$LOGS/runs.txt"
import json, sys
try:
    report = json.load(open(sys.argv[1]))
except (OSError, ValueError) as exc:
    sys.exit(f"  no report: {exc}")
for machine, cost in (report.get("cost") or {}).items():
    print(f"  {machine}: benchmark s {cost.get('benchmark_seconds')}, asv wall s {cost.get('asv_wall_seconds')}, "
          f"saved s {cost.get('saved_seconds')}, measured commits {cost.get('measured_commits')}, identical {cost.get('identical')}")
print("  status:", json.dumps(report.get("status"))[:400])
EOF
}
finish() {
  nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv > "$LOGS/gpu_after.csv" 2>/dev/null
  mkdir -p "$LOGS/asv" "$OUT"
  cp -r "$WORK/.asv/results" "$LOGS/asv/results" 2>/dev/null
  tar -C "$(dirname "$LOGS")" -czf "$OUT/h200_history_cost.tar.gz" "$(basename "$LOGS")"
  echo "total wall $(( $(date +%s) - T0 )) s"
  cat "$LOGS/runs.txt"
}

rm -rf "$LOGS" && mkdir -p "$LOGS"
trap finish EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv | tee "$LOGS/gpu_before.csv"
step install 90 python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$WHL"/*.whl > "$LOGS/install.log" 2>&1 || exit 2
export PYTHONPATH=$SITE
rm -rf "$WORK" && git clone -q -b main .dev/repo.bundle "$WORK" && cd "$WORK" || exit 2
git config user.email exp@example.invalid && git config user.name exp
python3 docs/data/make_experiment_branches.py || exit 2
export PYTHONPATH=$WORK:$SITE
MXFP4_STACK_PYTHON=$(command -v python3)
export MXFP4_STACK_PYTHON

# 1. one commit, the whole GPU suite, benchmarks forked from a process that imported the suite
job full_main 300 --branch main --commits 1 --launch-method forkserver
# 2. identical code: main's tip is measured; exp/docs-only's tip copies it
job docs_only 90 --branch exp/docs-only --commits 2 --launch-method forkserver
# 3. a kernel wrong only at the measured shape: recorded as failed, never as a speed
job wrong_at_8192 90 --branch exp/wrong-at-8192 --commits 1 --bench "$TRACKED_8192" --launch-method forkserver
# 4. an improvement through the speed gate
step faster_one 70 python3 -m ci.speed --thresholds ci/speed_thresholds_h200.json --base exp/slow --head exp/faster \
  --kernel triton_dot_scaled --config m128_n128_k128_w8_s3 --shape square_m08192_n08192_k08192 --max-minutes 1 \
  --json "$LOGS/faster_one.json" > "$LOGS/faster_one.md" 2> "$LOGS/faster_one.log"
grep -E "^speed_gate: (PASS|FAIL)|improvement" "$LOGS/faster_one.md" "$LOGS/faster_one.log" | cut -c1-200 | head -4
