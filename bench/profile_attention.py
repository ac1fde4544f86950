"""Two attention training steps (B8 H8 n1024 hd64, use_flash=True) for a kernel profiler:

    ncu -k regex:flash --launch-skip 3 --launch-count 3 --section SpeedOfLight \\
        python3 bench/profile_attention.py

The first step warms up; the profiler then sees the second step's forward, dQ and dK/dV kernels.
"""
import numpy as np

import torchlean as tl

B, H, n, hd = 8, 8, 1024, 64
d = H * hd
rng = np.random.default_rng(0)
x = tl.AnyBuffer.from_numpy(rng.uniform(-1, 1, (B, n, d)).astype(np.float32))
Ws = [tl.AnyBuffer.from_numpy(rng.uniform(-.05, .05, (d, d)).astype(np.float32)) for _ in range(4)]
g = rng.uniform(-1, 1, (B, n, d)).astype(np.float32)
for _ in range(2):
    t = tl.Tape()
    ids = [t.leaf(w) for w in Ws] + [t.leaf(x)]
    out = t.multi_head_attention(*ids, num_heads=H, use_flash=True)
    t.backward(out, seed=g, wrt=ids)
    tl.synchronize()
    t.release()
print("done")
