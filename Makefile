# torchlean build: every step a newcomer or CI needs. `make help` lists the targets.
PY        ?= python3
CC        ?= cc
NVCC      ?= $(CUDA_HOME)/bin/nvcc
CUDA_HOME ?= /usr/local/cuda
LIBDIR    := torchlean/lib
STUB_LIB  := $(LIBDIR)/libtorchlean_stub.so
CUDA_LIB  := $(LIBDIR)/libtorchlean_cuda.so
INCLUDES  := -Inative/include -Inative/common -Inative
# native/generated/ is generated (make gen): the argument contract of every kernel, the kernel
# bodies' declarations, the generated maps; sources include them as "generated/<file>"
COMMON_SRC := $(wildcard native/common/*.c native/generated/*.c)
STUB_SRC  := $(wildcard native/stub/*.c)
CUDA_SRC  := $(wildcard native/cuda/*.cu)
# every object tracks the headers it includes (-MMD -MP), so a registry edit rebuilds only the
# families whose generated files changed, and a doc-only edit rebuilds nothing
DEPFLAGS  := -MMD -MP
# The stub is the reference: no fast-math, no FMA contraction, fixed summation orders.
STUB_CFLAGS ?= -std=gnu11 -O3 -march=native -ffp-contract=off -fno-math-errno -fopenmp -fPIC \
               -fvisibility=hidden -Wall -Wextra -Wno-unused-parameter -Werror=implicit-function-declaration
CUDA_CFLAGS ?= -std=gnu11 -O2 -fPIC -fvisibility=hidden -ffp-contract=off -Wall
CUDA_ARCH ?= -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90
NVCC_FLAGS ?= -std=c++17 -O3 $(CUDA_ARCH) -Xcompiler -fPIC,-fvisibility=hidden --fmad=false \
              -Inative/include -Inative/common -Inative -Inative/cuda
PYTEST_ARGS ?=
export PYTHONDONTWRITEBYTECODE=1

.PHONY: all stub cuda cuda-bench docs-check gen gen-check op-coverage test test-fast test-cuda sanitize sanitize-cuda bench bench-cuda \
        bench-models demo install clean help symbols-check check-math check-math-cuda \
        check-math-same check-special

all: stub                                  ## build the stub library (default)

help:                                      ## list targets
	@grep -E '^[a-z-]+:.*##' Makefile | sed -E 's/:.*## /\t/'

stub: $(STUB_LIB)                          ## build torchlean/lib/libtorchlean_stub.so

STUB_OBJS := $(patsubst native/%.c,build/stub/%.o,$(COMMON_SRC) $(STUB_SRC))

build/stub/%.o: native/%.c
	@mkdir -p $(dir $@)
	$(CC) $(STUB_CFLAGS) $(DEPFLAGS) $(INCLUDES) -Inative/stub -c $< -o $@

# linked without libgomp: native/stub/threads.c is the stub's OpenMP runtime (a missing GOMP
# entry point fails the link instead of loading libgomp)
$(STUB_LIB): $(STUB_OBJS)
	@mkdir -p $(LIBDIR)
	$(CC) $(filter-out -fopenmp,$(STUB_CFLAGS)) -shared -Wl,-z,nodelete -Wl,--no-undefined \
	  -o $@ $(STUB_OBJS) -lm -lpthread

cuda: $(CUDA_LIB)                          ## build torchlean/lib/libtorchlean_cuda.so (needs nvcc)

# one object per source so `make -j cuda` compiles the kernel files in parallel
CUDA_OBJS := $(patsubst native/common/%.c,build/cuda/%.c.o,$(filter native/common/%,$(COMMON_SRC))) \
             $(patsubst native/generated/%.c,build/cuda/generated/%.c.o,$(filter native/generated/%,$(COMMON_SRC))) \
             $(patsubst native/cuda/%.cu,build/cuda/%.cu.o,$(CUDA_SRC))

build/cuda/%.c.o: native/common/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CUDA_CFLAGS) $(DEPFLAGS) $(INCLUDES) -c $< -o $@

build/cuda/generated/%.c.o: native/generated/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CUDA_CFLAGS) $(DEPFLAGS) $(INCLUDES) -c $< -o $@

build/cuda/%.cu.o: native/cuda/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) $(DEPFLAGS) -c $< -o $@

$(CUDA_LIB): $(CUDA_OBJS)
	@mkdir -p $(LIBDIR)
	$(NVCC) -shared $(CUDA_ARCH) -o $@ $(CUDA_OBJS) -L$(CUDA_HOME)/lib64 -lcudart -lcublas -lcublasLt \
	  -Xlinker -rpath,$(CUDA_HOME)/lib64

# the benchmark build: the same library with the kernel-choice switches of
# native/cuda/bench_switches.h read from the environment, in a folder of its own so the product
# library never reads them (TORCHLEAN_LIB_DIR=build/cuda-bench loads it)
# Only the files that read a switch are compiled twice; the rest are the product's objects.
BENCH_DIR       := build/cuda-bench
BENCH_SRC       := $(shell grep -l bench_switches.h $(CUDA_SRC))
CUDA_BENCH_OBJS := $(filter-out $(patsubst native/cuda/%.cu,build/cuda/%.cu.o,$(BENCH_SRC)),$(CUDA_OBJS)) \
                   $(patsubst native/cuda/%.cu,$(BENCH_DIR)/%.cu.o,$(BENCH_SRC))

$(BENCH_DIR)/%.cu.o: native/cuda/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -DTL_BENCH_SWITCHES $(DEPFLAGS) -c $< -o $@

$(BENCH_DIR)/libtorchlean_cuda.so: $(CUDA_BENCH_OBJS)
	$(NVCC) -shared $(CUDA_ARCH) -o $@ $(CUDA_BENCH_OBJS) -L$(CUDA_HOME)/lib64 -lcudart -lcublas \
	  -lcublasLt -Xlinker -rpath,$(CUDA_HOME)/lib64

cuda-bench: $(BENCH_DIR)/libtorchlean_cuda.so  ## the CUDA library with benchmark switches (needs nvcc)

-include $(STUB_OBJS:.o=.d) $(CUDA_OBJS:.o=.d) $(CUDA_BENCH_OBJS:.o=.d)

# the canonical arithmetic: tl_math.h and the headers it stands on (rules 1 and 2)
TL_MATH := native/common/tl_math.h native/common/tl_math_transcendental.h native/common/tl_math_ieee.h

# test shims for the canonical arithmetic (native/common/tl_math.h): the header compiled with the
# stub's flags into a library tests/test_exact_math.py loads, and as CUDA device code into a
# program that compares every float32 input's device result with the host's (GPU machine)
build/tl_math_test.so: tests/native/tl_math_shim.c tests/native/cr_oracle.h $(TL_MATH) native/common/tl_math_more.h
	@mkdir -p build
	$(CC) $(STUB_CFLAGS) -Inative/common -shared -Wl,-z,nodelete -o $@ $< -lquadmath -lm

build/tl_math_device_check: tests/native/tl_math_device_check.cu $(TL_MATH) native/common/tl_math_more.h \
                             native/common/formulas/pointwise_math.h native/common/tl_math_special.h \
                             native/common/tl_math_bessel.h native/common/tl_math_airy.h
	@mkdir -p build
	$(NVCC) -std=c++17 -O3 $(CUDA_ARCH) --fmad=false -Xcompiler -O3,-march=native,-fopenmp,-ffp-contract=off \
	  -Inative/common -o $@ $< -lgomp

check-math-cuda: build/tl_math_device_check  ## device = host bits on all 2^32 inputs per function (GPU)
	build/tl_math_device_check

# exhaustive proof that tl_math.h's transcendental functions are correctly rounded (all 2^32
# inputs per function against glibc double + libquadmath; minutes per function, outside CI)
build/check_math: tests/native/check_math.c tests/native/cr_oracle.h $(TL_MATH) native/common/tl_math_more.h
	@mkdir -p build
	$(CC) $(STUB_CFLAGS) -Inative/common -o $@ $< -lquadmath -lm

check-math: build/check_math               ## exhaustive correct-rounding check (long; not in CI)
	build/check_math

# atan2 and hypot (two arguments): random pairs against glibc double + libquadmath
build/check_math2: tests/native/check_math2.c tests/native/cr_oracle.h $(TL_MATH) native/common/tl_math_more.h
	@mkdir -p build
	$(CC) $(STUB_CFLAGS) -Inative/common -o $@ $< -lquadmath -lm

# the special functions (erfc ... Bessel J, Y) against glibc double + libquadmath on all 2^32
# inputs: which are correctly rounded, and the largest error of those that are not
SPECIAL_DEPS := tests/native/check_special.c tests/native/cr_special_oracle.h native/common/formulas/pointwise_math.h \
                native/common/tl_math_special.h native/common/tl_math_bessel.h native/common/tl_math_airy.h
build/check_special: $(SPECIAL_DEPS)
	@mkdir -p build
	$(CC) $(STUB_CFLAGS) -Inative/common -Itests/native -o $@ $< -lquadmath -lm

check-special: build/check_special         ## exhaustive check of the special functions (long; not in CI)
	build/check_special

# the current header against the proven double-double version (tests/native/tl_math_cr_ref.h),
# bit for bit on all 2^32 inputs per function, on all cores (seconds on 16 cores)
SAME_DEPS := tests/native/check_math_same_eval.c $(TL_MATH) tests/native/tl_math_cr_ref.h
build/check_math_same: tests/native/check_math_same.c $(SAME_DEPS)
	@mkdir -p build
	$(CC) $(STUB_CFLAGS) -Inative/common -DTLM_HEADER='"tl_math.h"' -DEVAL=cur_eval -c \
	  tests/native/check_math_same_eval.c -o build/check_math_same_cur.o
	$(CC) $(STUB_CFLAGS) -Itests/native -DTLM_HEADER='"tl_math_cr_ref.h"' -DEVAL=ref_eval -c \
	  tests/native/check_math_same_eval.c -o build/check_math_same_ref.o
	$(CC) $(STUB_CFLAGS) -o $@ $< build/check_math_same_cur.o build/check_math_same_ref.o

check-math-same: build/check_math_same     ## current tl_math.h = the proven version, all 2^32 inputs
	build/check_math_same

# The emulation's globals are C++ inline variables, which g++ makes process-wide unique symbols:
# two emulated libraries in one process would share (and twice destroy) them. -fno-gnu-unique
# keeps each library's own.
EMU_OWN := $(shell $(CXX) -fno-gnu-unique -x c++ -E /dev/null >/dev/null 2>&1 && echo -fno-gnu-unique)

# one emulated library from its first prerequisite (tests/native/*_emu.cpp), written under a
# temporary name and moved into place
EMU_LINK = @mkdir -p build && $(CXX) -std=c++17 -O2 -fPIC -fno-strict-aliasing -ffp-contract=off \
  $(EMU_OWN) -Wall -Wno-unknown-pragmas -Itests/native/cuda_emu -Inative/cuda -Inative/common \
  -Inative/include -shared -o $@.$$$$ $< && mv -f $@.$$$$ $@

# the tiled CUDA attention kernels (native/cuda/attention_tiled.cuh) compiled for the CPU with a
# small CUDA emulation (tests/native/cuda_emu/), so tests/test_attention_tiles.py checks them
# without a GPU
ATTN_EMU_DEPS := tests/native/attention_tiled_emu.cpp tests/native/cuda_emu/cuda_runtime.h \
                 native/cuda/attention_tiled.cuh native/cuda/attention_exact.cuh \
                 native/cuda/reduce_util.cuh $(TL_MATH)
build/attention_tiled_emu.so: $(ATTN_EMU_DEPS)
	$(EMU_LINK)

# exact mode's convolution kernels (native/cuda/conv_exact.cuh) on the CPU, the same emulation:
# tests/test_conv_exact_kernels.py compares them with the stub bit for bit
CONV_EMU_DEPS := tests/native/conv_exact_emu.cpp tests/native/cuda_emu/cuda_runtime.h \
                 native/cuda/conv_exact.cuh $(TL_MATH)
build/conv_exact_emu.so: $(CONV_EMU_DEPS)
	$(EMU_LINK)

# exact batchnorm's parallel chunk sums (native/cuda/bn_exact.cuh) on the CPU, the same emulation
BN_EMU_DEPS := tests/native/bn_exact_emu.cpp tests/native/cuda_emu/cuda_runtime.h \
               native/cuda/bn_exact.cuh native/cuda/reduce_util.cuh $(TL_MATH) \
               native/common/formulas/normalize.h
build/bn_exact_emu.so: $(BN_EMU_DEPS)
	$(EMU_LINK)

# exact mode's GEMM kernels (native/cuda/gemm_x64.cuh: FP64-tensor-core tiles, split, fold,
# general) on the CPU, the same emulation: tests/test_gemm_x64_kernels.py compares them with the
# stub bit for bit
GEMM64_EMU_DEPS := tests/native/gemm_x64_emu.cpp tests/native/cuda_emu/cuda_runtime.h \
                   native/cuda/gemm_x64.cuh $(TL_MATH)
build/gemm_x64_emu.so: $(GEMM64_EMU_DEPS)
	$(EMU_LINK)

# the sort family's kernels other than CUB's sorts (native/cuda/sort_kernels.cuh) on the CPU, the
# same emulation: tests/test_sort_kernels.py compares them with the stub bit for bit
SORT_EMU_DEPS := tests/native/sort_emu.cpp tests/native/cuda_emu/cuda_runtime.h \
                 native/cuda/sort_kernels.cuh native/common/formulas/sort.h $(TL_MATH)
build/sort_emu.so: $(SORT_EMU_DEPS)
	$(EMU_LINK)

# the small digest batch's kernel (native/cuda/audit_small.cuh) on the CPU, the same emulation:
# tests/test_audit_kernels.py compares it with the definition and the loaded library
AUDIT_EMU_DEPS := tests/native/audit_emu.cpp tests/native/cuda_emu/cuda_runtime.h \
                  native/cuda/audit_small.cuh native/common/formulas/audit.h native/common/tl_internal.h \
                  $(TL_MATH)
build/audit_emu.so: $(AUDIT_EMU_DEPS)
	$(EMU_LINK)

# the tiled grouped/depthwise convolution kernels (native/cuda/conv_grouped_tiles.cuh) on the
# CPU, the same emulation: tests/test_conv_grouped_tiles.py compares them with the stub
GCONV_EMU_DEPS := tests/native/conv_grouped_emu.cpp tests/native/cuda_emu/cuda_runtime.h \
                  native/cuda/conv_grouped_tiles.cuh native/common/conv_grouped.h $(TL_MATH)
build/conv_grouped_emu.so: $(GCONV_EMU_DEPS)
	$(EMU_LINK)

gen:                                       ## regenerate header, cffi defs and tape ops from ops.yaml
	$(PY) -m codegen.gen

gen-check:                                 ## fail if generated files are out of step with ops.yaml
	$(PY) -m codegen.gen --check

op-coverage:                               ## regenerate docs/op-coverage.md (PyTorch op names present)
	$(PY) -m codegen.op_coverage

symbols-check: $(STUB_LIB)                 ## the built libraries export exactly the header's symbols
	$(PY) -m codegen.symbols $(STUB_LIB) $(wildcard $(CUDA_LIB))

install:                                   ## pip install -e the package with its test extra (stub only)
	TORCHLEAN_BUILD_CUDA=$${TORCHLEAN_BUILD_CUDA:-0} $(PY) -m pip install -q -e '.[test]' || \
	  TORCHLEAN_BUILD_CUDA=$${TORCHLEAN_BUILD_CUDA:-0} $(PY) -m pip install -q --user -e '.[test]'

# the dependencies of the named extras, not torchlean itself: `make test` and `make demo` run the
# checkout, so they neither rebuild nor replace what `pip install .` built (the CUDA library too)
deps-%:
	$(PY) -m pip install -q $$($(PY) tools/requirements.py $*) || \
	  $(PY) -m pip install -q --user $$($(PY) tools/requirements.py $*)

test: deps-test gen-check stub             ## set up on a fresh machine and run the whole CPU suite
	TORCHLEAN_BACKEND=stub $(PY) -m pytest -q -n 2 $(PYTEST_ARGS) tests

docs-check: stub                           ## every command and figure of README.md and docs/ checked
	TORCHLEAN_BACKEND=stub $(PY) -m pytest -q -p no:cacheprovider tests/test_docs.py

test-fast: stub                            ## run the suite without the install step
	TORCHLEAN_BACKEND=stub $(PY) -m pytest -q -x $(PYTEST_ARGS) tests

test-cuda: cuda cuda-bench stub            ## the whole suite on the CUDA backend (GPU machine)
	TORCHLEAN_BACKEND=cuda TORCHLEAN_REQUIRE_CUDA=1 $(PY) -m pytest -q -rfEs -p no:cacheprovider \
	  $(PYTEST_ARGS) tests

# ASan + UBSan: the stub built with the sanitizers into its own folder (the normal build is
# untouched), loaded through TORCHLEAN_LIB_DIR with libasan preloaded into Python (it must come
# first). Leak detection is on: every process writes its reports into $(SAN_LOGS), and
# tools/sanitizer_logs.py fails the run on any sanitizer error and on any leak whose allocation
# passes through torchlean's native code; the interpreter's own leaks at exit (CPython keeps
# memory until exit by design) are counted, not judged.
SAN_DIR    := build/sanitize
SAN_LIB    := $(SAN_DIR)/libtorchlean_stub.so
SAN_LOGS   := $(SAN_DIR)/logs
SAN_CFLAGS ?= -std=gnu11 -O1 -g -march=native -ffp-contract=off -fno-math-errno -fopenmp -fPIC \
              -fvisibility=hidden -fno-omit-frame-pointer -fsanitize=address,undefined \
              -fno-sanitize-recover=undefined -Wall
SANITIZE_CPU_TESTS ?= tests
SANITIZE_CPU_ARGS  ?= -n 2

# -fopenmp compiles the parallel loops into calls that native/stub/threads.c answers; --as-needed
# keeps libgomp out of the library, and -z nodelete keeps it mapped after the interpreter's
# teardown dlcloses it (its worker threads outlive that: the leak check's stop-the-world wakes
# them, and they would run unmapped code), as the normal build does
SAN_HEADERS := $(wildcard native/include/*.h native/common/*.h native/common/formulas/*.h \
                 native/generated/*.h native/generated/*.inc native/stub/*.h)
$(SAN_LIB): $(COMMON_SRC) $(STUB_SRC) $(SAN_HEADERS)
	@mkdir -p $(SAN_DIR)
	$(CC) $(SAN_CFLAGS) $(INCLUDES) -Inative/stub -shared -Wl,--as-needed -Wl,-z,nodelete -o $@ \
	  $(COMMON_SRC) $(STUB_SRC) -lm -lpthread

sanitize: $(SAN_LIB) stub                  ## the CPU suite on an ASan+UBSan build of the stub, leaks checked
	rm -rf $(SAN_LOGS) && mkdir -p $(SAN_LOGS)
	TORCHLEAN_BACKEND=stub TORCHLEAN_LIB_DIR=$(CURDIR)/$(SAN_DIR) \
	  LD_PRELOAD="$$($(CC) -print-file-name=libasan.so)" \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:halt_on_error=1:log_path=$(CURDIR)/$(SAN_LOGS)/asan \
	  LSAN_OPTIONS=exitcode=0 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$(CURDIR)/$(SAN_LOGS)/ubsan \
	  $(PY) -m pytest -q -p no:cacheprovider $(SANITIZE_CPU_ARGS) $(PYTEST_ARGS) $(SANITIZE_CPU_TESTS); \
	  st=$$?; $(PY) tools/sanitizer_logs.py $(SAN_LOGS) || st=1; exit $$st

# memcheck is slow: by default a subset that still launches every kernel (registry cases) and
# the runtime paths; tests that fault on purpose (sticky errors, OOM) are left out.
SANITIZE_TESTS ?= tests/test_registry_ops.py tests/test_cuda_runtime.py tests/test_determinism.py \
                  tests/test_conv_pool.py tests/test_attention.py
SANITIZE_K ?= not huge and not sticky
sanitize-cuda: cuda stub                   ## compute-sanitizer memcheck over a CUDA test subset
	TORCHLEAN_BACKEND=cuda TORCHLEAN_REQUIRE_CUDA=1 \
	  $(CUDA_HOME)/bin/compute-sanitizer --tool memcheck --error-exitcode 1 \
	  --target-processes application-only \
	  $(PY) -m pytest -q -p no:cacheprovider -k "$(SANITIZE_K)" $(PYTEST_ARGS) $(SANITIZE_TESTS)

bench: stub                                ## stub vs NumPy table into bench/results/
	TORCHLEAN_BACKEND=stub $(PY) bench/bench_stub.py --out bench/results/stub.md

bench-cuda: cuda                           ## CUDA vs PyTorch: ops (cuda.md), then the models (models.md)
	TORCHLEAN_BACKEND=cuda $(PY) bench/bench_cuda.py --out bench/results/cuda.md
	TORCHLEAN_BACKEND=cuda $(PY) bench/bench_models.py --out bench/results/models.md

bench-models: cuda                         ## six realistic models vs PyTorch into bench/results/models.md
	TORCHLEAN_BACKEND=cuda $(PY) bench/bench_models.py --out bench/results/models.md

demo: deps-examples stub                   ## install the examples' dependencies, train the digits CNN
	PYTHONPATH=$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH} $(PY) examples/digits_cnn.py

clean:                                     ## remove built libraries
	rm -rf $(LIBDIR) build
