#!/usr/bin/env bash
# Default-mode data parallel at W = 4 on short steps, variants interleaved in REPS rounds
# (device kind nvidia-h200-x4; about 4 min): W = 1, then at W = 4 the default, the buckets
# started once the step check arrived (gate), every gradient in one flat all-reduce per bucket
# (TORCHLEAN_DDP_FLAT_BYTES), and one bucket; cnn and lm, host timelines.
#     OUT=/tmp/o bash bench/device/ddp_w4_ab2.sh
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ddp-w4-ab2}
. bench/device/ddp_env.sh
J="$OUT/ab2.jsonl"; : >"$J"
R() { timeout 90 "${MPIRUN[@]}" "$@" 2>&1 | grep "^## \|Error\|error" | tail -4; }
B="bench/bench_ddp.py run --model cnn,lm --steps 40 --timeline --out $J"
for rep in $(seq ${REPS:-3}); do
  R -n 1 python3 $B --tag "w1r$rep"
  R -n 4 python3 $B --tag "r$rep"
  R -n 4 python3 $B --diag gate --tag "r$rep"
  TORCHLEAN_DDP_FLAT_BYTES=1073741824 R -x TORCHLEAN_DDP_FLAT_BYTES -n 4 python3 $B --tag "flatr$rep"
  R -n 4 python3 $B --diag onebucket --tag "r$rep"
done
python3 - "$J" <<'PY'
import json, sys, collections, statistics
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    v = r["variant"].split("+")
    name = "+".join(x.rstrip("0123456789").removesuffix("r") if x.startswith(("w1r", "flatr", "r")) else x for x in v)
    rows[(r["model"], r["world"], name)].append(r["median_ms"])
for k, v in sorted(rows.items()):
    print(k, [round(x, 2) for x in v], "median", round(statistics.median(v), 2))
PY
