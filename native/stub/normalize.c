/* normalize.c (stub): the row loops ops.yaml's `normalize:` ops generate (codegen/normalize.py),
 * over their formulas in native/common/formulas/normalize.h: a parallel loop over the rows, each
 * row's sums by rule 4 of tl_math.h in every mode (tl_rule4_sum; column sums tl_stub_axis_sum). */
#include "stub.h"
#include "generated/normalize_stub.inc"
