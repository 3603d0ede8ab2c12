#!/usr/bin/env bash
# The H200 cost experiment of issues 17 and 21 (docs/SPEED_GATE.md, "GPU cost"): run from the repository
# root on the lent H200 with the wheels and a git bundle of main in .dev/ (see /work/.library: device).
# Every gate run writes its JSON record and Markdown under $OUT; wall seconds are printed per run.
#   part 1, 2: the first lease (2026-12-02, main 9928eb6); part 3: the same PRs after the plan's
#   per-tail alpha, futility stop and cheaper repeat timings; part 4: the full default selection.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .dev/whl/*.whl >/dev/null 2>&1 || exit 2
export PYTHONPATH=/tmp/site
rm -rf /tmp/r && git clone -q -b main .dev/repo.bundle /tmp/r && cd /tmp/r || exit 2
git config user.email exp@example.invalid && git config user.name exp
python3 docs/data/make_experiment_branches.py || exit 2
export PYTHONPATH=/tmp/r:/tmp/site
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv | tee /tmp/gpu_before.csv
LOGS=/tmp/h200_logs; rm -rf "$LOGS"; mkdir -p "$LOGS"
gate() {  # gate NAME ARGS...: one gate run with the H200 thresholds; wall time, exit code, Markdown, log and JSON
  local name=$1; shift
  local t0; t0=$(date +%s.%N)
  python3 -m ci.speed --thresholds ci/speed_thresholds_h200.json "$@" --json "$LOGS/$name.json" > "$LOGS/$name.md" 2> "$LOGS/$name.log"
  local rc=$?
  echo "$name: exit $rc, wall $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s" | tee -a "$LOGS/runs.txt"
  grep -E "^speed_gate: (PASS|FAIL)|GPU (runner|time)|^\| .*(regression|no change|inconclusive|wrong)" "$LOGS/$name.md" "$LOGS/$name.log" | cut -c1-220 | head -8
}
TRACKED=(--kernel triton_dot_scaled --config m128_n128_k128_w8_s3)
S8=(--shape square_m08192_n08192_k08192)
if [ "${1:-1}" = 1 ]; then  # part 1: identical code, one benchmark per engine, a wrong kernel
  gate docs_only --base main --head exp/docs-only
  gate comment_only --base main --head exp/comment-only
  gate torch_only --base main --head exp/torch-only "${S8[@]}" --max-minutes 2
  gate slow_one --base main --head exp/slow "${TRACKED[@]}" "${S8[@]}" --max-minutes 2
  gate wrong_at_8192 --base main --head exp/wrong-at-8192 "${TRACKED[@]}" "${S8[@]}" --max-minutes 1
  # --engine fresh was retired in issue 28: this step fails there now (exit 2); its record of 2026-12-02 stays.
  gate slow_one_fresh --base main --head exp/slow "${TRACKED[@]}" "${S8[@]}" --engine fresh --max-minutes 2
elif [ "$1" = 2 ]; then  # part 2: a kernel PR of 10 benchmarks (both configs x five shapes), slowed and A/A
  gate slow_ten --base main --head exp/slow --kernel triton_dot_scaled --max-minutes 4
  gate aa_ten --base main --head exp/docs-only --kernel triton_dot_scaled --measure-identical --max-minutes 4
elif [ "$1" = 3 ]; then  # part 3: the earlier verdicts and the 10-benchmark PR with the plan of issue 21's second step
  gate slow_one --base main --head exp/slow "${TRACKED[@]}" "${S8[@]}" --max-minutes 2
  gate faster_one --base exp/slow --head main "${TRACKED[@]}" "${S8[@]}" --max-minutes 2
  gate wrong_at_8192 --base main --head exp/wrong-at-8192 "${TRACKED[@]}" "${S8[@]}" --max-minutes 1
  gate slow_ten --base main --head exp/slow --kernel triton_dot_scaled --max-minutes 3
  gate aa_ten --base main --head exp/docs-only --kernel triton_dot_scaled --measure-identical --max-minutes 3
else  # part 4: the full default selection on a head that changes every launch path's source, not its work
  gate all_launch_paths --base main --head exp/all-launch-paths --max-minutes 8
fi
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv | tee /tmp/gpu_after.csv
mv /tmp/gpu_before.csv /tmp/gpu_after.csv "$LOGS/"
tar -C /tmp -czf "$OUT/h200_part${1:-1}.tar.gz" h200_logs  # one file back: the device returns at most 8
cat "$LOGS/runs.txt"
