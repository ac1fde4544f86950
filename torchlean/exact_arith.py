"""The version number of exact mode's arithmetic.

Stored exact results say which arithmetic produced them. EXACT_VERSION changes whenever any
exact-mode bit can change (a rule, a function, an order); README "Reproducibility levels"
lists each version's change, and tests/test_exact_version.py pins a digest of exact-mode bits
to it, so a change of bits without a new version fails CI.
"""

EXACT_VERSION = 7   # 2: transcendental functions correctly rounded (issue 26); 3: GEMM k chunks of 256 (issue 34);
                    # 4: the special functions' fixes from their runs on all 2^32 inputs (issue 32);
                    # 5: K0, K1, e^x K0, e^x K1 below 2 and Airy Ai below -8 in double-double (issue 32);
                    # 6: Airy Ai's two midpoints of its all-input run selected, running sums of rows
                    #    longer than 256 chunks take their carries in the chunked order (issue 32);
                    # 7: the exact GEMM's chunk chains and their fold in float64, one rounding per
                    #    output (FP64 tensor cores on CUDA; issue 34)


def exact_version() -> int:
    """The version of the exact arithmetic (torchlean.set_exact): an int that changes whenever
    any exact-mode result can change."""
    return EXACT_VERSION
