#!/bin/bash
# bench_tl_math.sh [host|cuda]...: tl_math.h's functions per header version, as a markdown table.
# Versions: poly (bench/ref/tl_math_poly.h, the pre-CR polynomials), cr_dd (tests/native/
# tl_math_cr_ref.h, the first correctly rounded version, double-double throughout) and current
# (native/common/tl_math.h). host: ns per element, one thread, stub loop form (bench_tl_math.c);
# cuda: microseconds per 2^26-element kernel (bench_tl_math.cu). Builds under build/btm_*.
set -e
cd "$(dirname "$0")/.."
NVCC=${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}
VERSIONS="poly:bench/ref/tl_math_poly.h cr_dd:tests/native/tl_math_cr_ref.h current:native/common/tl_math.h"
for side in "${@:-host}"; do
    for v in $VERSIONS; do
        n=${v%%:*}; d=build/btm_$n; mkdir -p $d; cp ${v#*:} $d/tl_math.h
        if [ $side = host ]; then
            ${CC:-cc} -std=gnu11 -O3 -march=native -ffp-contract=off -fno-math-errno -I$d \
                bench/bench_tl_math.c -o $d/bench_host -lm
            $d/bench_host > $d/host.txt
        else
            $NVCC -std=c++17 -O3 -gencode=arch=compute_90,code=sm_90 --fmad=false -I$d \
                bench/bench_tl_math.cu -o $d/bench_cuda
            $d/bench_cuda > $d/cuda.txt
        fi
    done
    unit=$([ $side = host ] && echo "ns/element, 1 thread" || echo "us per 2^26 elements")
    echo "| function ($side, $unit) | poly (pre-CR) | cr_dd | current | current / poly | current / cr_dd |"
    echo "|---|---|---|---|---|---|"
    paste build/btm_poly/$side.txt build/btm_cr_dd/$side.txt build/btm_current/$side.txt |
        awk '{printf "| %s | %s | %s | %s | %.2fx | %.2fx |\n", $1, $2, $4, $6, $6/$2, $6/$4}'
    echo
done
