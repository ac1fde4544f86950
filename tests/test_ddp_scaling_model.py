"""bench/bench_ddp_model.py's arithmetic: the alpha-beta fit recovers known costs, the step
model's closed forms, and its buckets are DistributedDataParallel's own."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import bench_ddp_model as m  # noqa: E402


def test_fit_recovers_alpha_and_beta_from_ring_costs():
    alpha, beta = 7e-6, 1 / 150e9
    pts = [(w, n, m.ring_cost(n, w, alpha, beta)) for w in (2, 3, 4) for n in m.SIZES]
    pts.append((1, 4096, 123.0))                  # W = 1 carries no communication: ignored
    f = m.fit_alpha_beta(pts)
    assert f["points"] == 3 * len(m.SIZES)
    assert f["alpha"] == pytest.approx(alpha, rel=1e-6)
    assert f["beta"] == pytest.approx(beta, rel=1e-6)
    # bandwidth data whose best unconstrained alpha is negative: alpha clamps at zero and
    # beta is refitted alone
    g = m.fit_alpha_beta([(2, n, n * beta - 1e-7) for n in m.SIZES[3:]])
    assert g["alpha"] == 0.0 and g["beta"] == pytest.approx(beta, rel=0.1)
    with pytest.raises(ValueError, match="W > 1"):
        m.fit_alpha_beta([(1, 10, 1.0)])


def test_costs_closed_forms():
    f = {"alpha": 2e-6, "beta": 1e-10}
    assert m.ring_cost(1e6, 4, **f) == pytest.approx(6 * 2e-6 + 1.5 * 1e6 * 1e-10)
    assert m.tree_cost(1e6, 5, **f) == pytest.approx(6 * 2e-6 + 2e6 * 1e-10)
    assert m.allreduce_cost(8, 256, f) == pytest.approx(m.tree_cost(8, 256, **f))   # latency
    assert m.allreduce_cost(1e9, 2, f) == pytest.approx(m.ring_cost(1e9, 2, **f))     # W = 2
    assert m.allreduce_cost(1e9, 2, f) < m.tree_cost(1e9, 2, **f)
    # exact: all-to-all (2 chunks of n/3 sent) + all-gather of n/3 (2 steps): 4 alpha + 4/3 n beta
    assert m.exact_cost(1e6, 3, f) == pytest.approx(4 * 2e-6 + 4 / 3 * 1e6 * 1e-10)
    assert m.allreduce_cost(1e6, 1, f) == 0.0


def test_step_time_overlap():
    f = {"alpha": 0.0, "beta": 1e-9}                  # 1 ms per MB per ring factor
    t1 = 0.030
    assert m.step_time(t1, [10**6], 1, f) == t1
    # one bucket, ready when backward ends: the whole reduction (2(W-1)/W n beta) is exposed
    assert m.step_time(t1, [10**6], 2, f) == pytest.approx(t1 + 1e-3)
    # two equal buckets: the first's reduction (1 ms) hides in the second half of backward
    # (10 ms); only the second's is exposed
    assert m.step_time(t1, [10**6, 10**6], 2, f) == pytest.approx(t1 + 1e-3)
    # communication longer than backward: the chain of reductions decides
    slow = {"alpha": 0.0, "beta": 1e-8}               # 10 ms per bucket
    assert m.step_time(t1, [10**6, 10**6], 2, slow) == pytest.approx(t1 + 2e-2 - 1e-2)
    # exact, W = 3: a ring all-reduce's bytes (2 * 2/3 n beta = 4/3 ms), all exposed
    assert m.step_time(t1, [10**6], 3, f, exact=True) == pytest.approx(t1 + 4e-3 / 3)


def test_cluster_parameters():
    nv, net = {"alpha": 3e-6, "beta": 1 / 300e9}, {"alpha": 20e-6, "beta": 1 / 5e9}
    assert m.cluster_fit(8, nv, net) is nv
    big = m.cluster_fit(16, nv, net)
    assert big["alpha"] == 20e-6 and big["beta"] == pytest.approx(1 / 50e9)


def test_buckets_are_distributed_data_parallels(monkeypatch):
    import torchlean.distributed as dist
    from torchlean import nn
    from torchlean.nn.parallel import DistributedDataParallel
    dist.init()                            # a plain process: a world of one
    net = nn.Sequential(nn.Linear(300, 500), nn.Tanh(), nn.Linear(500, 700), nn.Tanh(),
                        nn.Linear(700, 3))
    for cap in (25.0, 1.5, 0.5):
        for network in (False, True):     # within one host; across a network (1 MB first)
            monkeypatch.setattr(dist, "crosses_network", lambda: network)
            ddp = DistributedDataParallel(net, bucket_cap_mb=cap)
            want = [b.nbytes for b in ddp._buckets]
            ddp.remove_hooks()
            got = m.buckets_bytes([4 * int(np.prod(p.shape)) for p in net.parameters()], cap,
                                  network=network)
            assert got == want and len(want) >= 1
            assert (len(got) > 1) == (network or cap < 2.0)
        assert sum(got) == 4 * sum(int(np.prod(p.shape)) for p in net.parameters())
