#!/usr/bin/env bash
# The stub's default GEMM under several blockings on this host's CPU (bench/probes/gemm_variants.py):
# linalg.c rebuilt per variant with TL_GEMM_* and linked with the rest of the stub, each build
# timed at 1 and 2 threads on pinned cores, with the register-tile probe's peak beside it.
#   OUT=/tmp/o bash bench/device/gemm_variants.sh
set -u
OUT=${OUT:-/tmp/torchlean-gemm-variants}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >"$OUT/build.log" 2>&1
export PYTHONPATH="/tmp/site:$PWD"
make -j16 stub >>"$OUT/build.log" 2>&1
mkdir -p build && gcc -O3 -march=native -fopenmp -ffp-contract=off bench/probes/sgemm_tiles.c -o build/sgemm_tiles
{ taskset -c 2 build/sgemm_tiles 1 | head -1; taskset -c 2,3 build/sgemm_tiles 2 | head -1; } | tee "$OUT/peak.txt"
CF="-std=gnu11 -O3 -march=native -ffp-contract=off -fno-math-errno -fPIC -fvisibility=hidden"
OBJS=$(ls build/stub/common/*.o build/stub/generated/*.o build/stub/stub/*.o | grep -v '/stub/stub/linalg.o$')
ARGS=()
for v in ${VARIANTS:-"base:" "nv2:-DTL_GEMM_NV=2 -DTL_GEMM_NC=2048 -DTL_GEMM_JIT=8" "kc256:-DTL_GEMM_KC=256" \
    "kc512:-DTL_GEMM_KC=512" "mc96:-DTL_GEMM_MC=96" "mc384:-DTL_GEMM_MC=384" "nc960:-DTL_GEMM_NC=960" "jit3:-DTL_GEMM_JIT=3"}; do
  name=${v%%:*}; flags=${v#*:}; d=/tmp/gv/$name; mkdir -p "$d"
  gcc $CF -fopenmp -Inative/include -Inative/common -Inative -Inative/stub $flags -c native/stub/linalg.c -o "$d/linalg.o" \
    && gcc $CF -shared -Wl,-z,nodelete -Wl,--no-undefined -o "$d/libtorchlean_stub.so" $OBJS "$d/linalg.o" -lm -lpthread \
    && ARGS+=("$name=$d")
done
timeout "${GV_S:-400}" taskset -c 2,3 python3 bench/probes/gemm_variants.py "${ARGS[@]}" --threads 1,2 --rounds "${GV_ROUNDS:-3}" \
  ${GV_SHAPES:+--shapes $GV_SHAPES} | tee "$OUT/gemm-variants.md"
