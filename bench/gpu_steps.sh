# gpu_steps.sh: what the one-call GPU scripts (gpu_run.sh, gpu_ddp_run.sh) share, sourced by both.
# Each step runs under a timeout that never outlasts the script's total budget, and records one
# line in $SUMMARY; a failing or timed-out step never stops the run.
# Needs: SUMMARY (file), BUDGET (seconds), START (date +%s).

note() { echo "$*" | tee -a "$SUMMARY"; }

# step NAME LOG LIMIT_S CMD...: run CMD with a timeout of min(LIMIT_S, time left - 15 s)
step() {
  local name=$1 log=$2 limit=$3; shift 3
  local left=$((BUDGET - ($(date +%s) - START) - 15))
  if [ "$left" -lt 20 ]; then note "$name: SKIPPED (budget spent)"; return 0; fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$(date +%s)
  echo "=== $name (limit ${limit}s): $*" >>"$log"
  timeout -k 10 "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  local what="rc=$rc"
  { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && what="TIMED OUT after ${limit}s"
  note "$name: $what ($(($(date +%s) - t0)) s)"
  return 0
}
