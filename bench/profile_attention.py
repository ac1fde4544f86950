"""Two attention training steps (use_flash=True) for a kernel profiler:

    ncu -k regex:attn_ --launch-skip 3 --launch-count 3 --section SpeedOfLight \\
        python3 bench/profile_attention.py

The first step warms up; the profiler then sees the second step's forward, dQ and dK/dV kernels
(attn_fwd_tiled, attn_dq_tiled, attn_dkv_tiled for head dims 33..128). The shape defaults to
B8 H8 n1024 hd64; ATTN_SHAPE=4,16,2048,128 picks another (B, H, n, hd) and ATTN_CAUSAL=1 the
causal attr.
"""
import os

import numpy as np

import torchlean as tl

B, H, n, hd = (int(v) for v in os.environ.get("ATTN_SHAPE", "8,8,1024,64").split(","))
causal = os.environ.get("ATTN_CAUSAL") == "1"
d = H * hd
rng = np.random.default_rng(0)
x = tl.AnyBuffer.from_numpy(rng.uniform(-1, 1, (B, n, d)).astype(np.float32))
Ws = [tl.AnyBuffer.from_numpy(rng.uniform(-.05, .05, (d, d)).astype(np.float32)) for _ in range(4)]
g = rng.uniform(-1, 1, (B, n, d)).astype(np.float32)
for _ in range(2):
    t = tl.Tape()
    ids = [t.leaf(w) for w in Ws] + [t.leaf(x)]
    out = t.multi_head_attention(*ids, num_heads=H, use_flash=True, causal=causal)
    t.backward(out, seed=g, wrt=ids)
    tl.synchronize()
    t.release()
print("done")
