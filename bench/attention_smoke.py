"""GPU check of the attention backward variants at benchmark sizes: the one-pass backward
(TORCHLEAN_ATTN_BWD=onepass, onepass64) against the two-kernel one (=two), and each one-pass
variant rerun bit for bit. Exit status 0 when every check holds (bench/device scripts run it under a timeout
before the long runs, so a hang or a wrong answer shows first)."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torchlean as tl  # noqa: E402
from torchlean._generated import ops  # noqa: E402

ok = True
rng = np.random.default_rng(0)
for BH, n, hd, causal in [(64, 1024, 64, False), (96, 512, 64, True), (8, 2048, 128, True),
                          (4, 777, 96, False), (3, 65, 64, True)]:
    q, k, v, g = (tl.AnyBuffer.from_numpy(rng.standard_normal((BH, n, hd)).astype(np.float32))
                  for _ in range(4))
    fwd = ops.attention(q, k, v, causal=causal)
    res = {}
    for var in ("two", "onepass", "onepass", "onepass64", "onepass64"):
        os.environ["TORCHLEAN_ATTN_BWD"] = var
        out = [a.to_numpy() for a in ops.attention_backward(g, q, k, v, *fwd, causal=causal)]
        if var in res:
            same = all(np.array_equal(a.view(np.uint32), b.view(np.uint32))
                       for a, b in zip(out, res[var]))
            print(f"  BH{BH} n{n} hd{hd} causal={causal}: {var} rerun bit-identical: {same}")
            ok &= same
        res[var] = out
    for var in ("onepass", "onepass64"):
        for name, a, b in zip(("dq", "dk", "dv"), res[var], res["two"]):
            rel = float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))
            good = bool(np.isfinite(a).all()) and rel < 1e-5
            print(f"  BH{BH} n{n} hd{hd} causal={causal} {name}: {var} vs two max rel {rel:.1e}"
                  f"{'' if good else '  **BAD**'}")
            ok &= good
os.environ.pop("TORCHLEAN_ATTN_BWD", None)
print("attention smoke:", "ok" if ok else "FAILED")
sys.exit(0 if ok else 1)
