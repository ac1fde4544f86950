// normalize.cu (CUDA): the row kernels ops.yaml's `normalize:` ops generate (codegen/normalize.py),
// over their formulas in native/common/formulas/normalize.h: a block per row, its sums by rule 4
// of tl_math.h in exact mode (the stub's bits) and by tl_block_sum otherwise (tl_row_sum,
// reduce_util.cuh); column sums by tl_cuda_axis_sum.
#include "common.cuh"
#include "generated/normalize_cuda.inc"
