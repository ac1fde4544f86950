#!/bin/bash
# Before/after for a stub change on a shared machine: bench/bench_stub_torch.py run alternately
# with another build of the stub (BEFORE_LIB_DIR, e.g. main's torchlean/lib built in a second
# checkout; it must come from the same ops.yaml) and with this checkout's, each in its own
# process with PyTorch CPU beside it, so outside load hits both sides alike.
#   bench/stub_ab.sh BEFORE_LIB_DIR [alternations=2] [models] [python]
set -e
before=${1:?usage: bench/stub_ab.sh BEFORE_LIB_DIR [alternations] [models] [python]}
n=${2:-2}
models=${3:-digits_cnn,cnn_classifier,gpt_char,mlp,transformer,fno}
py=${4:-python3}
cd "$(dirname "$0")/.."
out=$(mktemp -d)
for r in $(seq 1 "$n"); do
  for side in before after; do
    echo "=== $side, alternation $r, $(date -u +%H:%M:%S) UTC, load average $(cut -d' ' -f1-3 /proc/loadavg)"
    if [ "$side" = before ]; then lib=(env TORCHLEAN_LIB_DIR="$before"); else lib=(env -u TORCHLEAN_LIB_DIR); fi
    "${lib[@]}" "$py" bench/bench_stub_torch.py --threads 2 --rounds 5 --steps 10 --models "$models" \
      --out "$out/$side-$r.md" | grep -E '^[a-z_]+: torchlean'
  done
done
echo "=== end, $(date -u +%H:%M:%S) UTC, load average $(cut -d' ' -f1-3 /proc/loadavg)"
rm -rf "$out"
