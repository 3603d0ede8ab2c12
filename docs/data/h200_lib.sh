# shellcheck shell=bash
# Shared by the H200 experiment scripts (sourced, not run): a time budget, timed steps, the device's set-up.
# The caller sets BUDGET_S (seconds the whole call may take), LOGS (what comes back), before h200_setup WORK (the
# clone to run in), ROOT (the carried working tree; used when BUNDLE, a bundle of main, is absent) and WHL (the carried
# wheels, .dev/whl), and before gate GATE_ARGS (the gate's model and thresholds).
T0=${T0:-$(date +%s)}

left() { echo $(( BUDGET_S - ($(date +%s) - T0) )); }

step() {  # step NAME CAP COMMAND...: under timeout min(CAP, what is left - 20 s for the tar); wall time and exit code
  local name=$1 cap=$2; shift 2
  local limit; limit=$(( $(left) - 20 )); [ "$limit" -gt "$cap" ] && limit=$cap
  if [ "$limit" -lt 5 ]; then echo "$name: skipped, the budget is spent" | tee -a "$LOGS/runs.txt"; return 124; fi
  local t0; t0=$(date +%s.%N)
  timeout -k 10 "$limit" "$@"
  local rc=$?
  echo "$name: exit $rc, wall $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s (limit $limit s; $(left) s of the budget left)" | tee -a "$LOGS/runs.txt"
  return $rc
}

h200_setup() {  # the wheels into $SITE, a clone of the bundled main (or $BRANCH, as main) in $WORK with the experiment branches
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv \
    | tee "$LOGS/gpu_before.csv"
  step install 90 python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$WHL"/*.whl \
    > "$LOGS/install.log" 2>&1 || exit 2
  if [ -f "$BUNDLE" ]; then
    rm -rf "$WORK" && git clone -q -b "${BRANCH:-main}" "$BUNDLE" "$WORK" && cd "$WORK" || exit 2
    git config user.email exp@example.invalid && git config user.name exp
  else  # no bundle carried (the tree and a bundle of it may not fit the carry limit together): the tree copied, as main
    rm -rf "$WORK" && mkdir -p "$WORK" && tar -C "$ROOT" --exclude=./.dev --exclude=./.git -cf - . | tar -C "$WORK" -xf - \
      && cd "$WORK" && git init -q -b main && git config user.email exp@example.invalid && git config user.name exp \
      && git add -A && git commit -qm "the working tree carried to the device" || exit 2
  fi
  [ "${BRANCH:-main}" = main ] || git checkout -q -B main  # the experiment branches grow from main: the branch cloned
  python3 docs/data/make_experiment_branches.py || exit 2
  export PYTHONPATH=$WORK:$SITE
}

h200_pack() {  # h200_pack NAME, the EXIT trap: the GPU's state after, the commit measured, $LOGS as $OUT/NAME.tar.gz
  nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv > "$LOGS/gpu_after.csv" 2>/dev/null
  git -C "$WORK" log -1 --format='%H %s' > "$LOGS/commit.txt" 2>/dev/null
  tar -C "$(dirname "$LOGS")" -czf "$OUT/$1.tar.gz" "$(basename "$LOGS")"
  echo "total wall $(( $(date +%s) - T0 )) s"
  cat "$LOGS/runs.txt"
}

gate() {  # gate NAME CAP BASE HEAD ARGS...: the CPU step (changes.json), then the gate with ${GATE_ARGS[@]} and ARGS
  local name=$1 cap=$2 base=$3 head=$4; shift 4
  step "$name.changes" 60 python3 -m ci.speed.changes --base "$base" --head "$head" --arch sm_90 \
    --json "$LOGS/$name.changes.json" > /dev/null 2> "$LOGS/$name.changes.log"
  step "$name" "$cap" python3 -m ci.speed --base "$base" --head "$head" --changes "$LOGS/$name.changes.json" \
    --json "$LOGS/$name.json" "${GATE_ARGS[@]}" "$@" > "$LOGS/$name.md" 2> "$LOGS/$name.log"
  grep -E "^### Speed gate|GPU runner|[Uu]nknown runner" "$LOGS/$name.md" | cut -c1-240 | head -3
}
