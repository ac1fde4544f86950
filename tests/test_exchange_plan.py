"""reduce.exchange_plan: the layout of exact data parallelism's all-to-all. Simulated in NumPy
for W ranks: packing each rank's micro-batch gradients by the plan, exchanging blocks, summing
each chunk in global micro-batch order (m = j * W + r, left to right in float32) and gathering
the chunks back must give, element for element, the left-to-right float32 sum of the W * K
micro-batch gradients in that order: what one process accumulating them computes."""
import numpy as np
import pytest

from torchlean.distributed.reduce import exchange_plan


def simulate(grads, sizes, k, world):
    """grads[r][i * k + j]: rank r's micro-batch j gradient of parameter i (float32 arrays)."""
    c, pieces = exchange_plan(sizes, k, world)
    sends = []
    for r in range(world):
        s = np.full(world * k * c, np.nan, np.float32)     # padding never reaches a result
        for m, src, dst, n in pieces:
            s[dst:dst + n] = grads[r][m][src:src + n]
        sends.append(s)
    out = np.empty(world * c, np.float32)
    for q in range(world):                                # rank q's received blocks
        recv = [sends[r][q * k * c:(q + 1) * k * c] for r in range(world)]
        rows = [recv[r][j * c:(j + 1) * c] for j in range(k) for r in range(world)]
        acc = rows[0].copy()
        for row in rows[1:]:
            acc = (acc + row).astype(np.float32)
        out[q * c:(q + 1) * c] = acc
    total = sum(sizes)
    assert not np.isnan(out[:total]).any()
    return out[:total]


@pytest.mark.parametrize("sizes,k,world", [
    ([7, 143, 1, 64], 1, 2), ([7, 143, 1, 64], 1, 3), ([7, 143, 1, 64], 3, 4),
    ([1], 1, 4), ([2], 2, 3), ([5, 5], 2, 2), ([1000, 3, 17], 2, 3), ([9], 5, 2)])
def test_plan_gives_the_ordered_sum(sizes, k, world):
    rng = np.random.default_rng(sum(sizes) * 31 + k * 7 + world)
    # magnitudes over many binades, so that any other summation order rounds differently
    grads = [[(rng.standard_normal(n) * 10.0 ** rng.integers(-6, 6, n)).astype(np.float32)
              for n in sizes for _ in range(k)] for _ in range(world)]
    # regroup: grads[r][i * k + j]
    grads = [[g[i * k + j] for i in range(len(sizes)) for j in range(k)] for g in grads]
    got = simulate(grads, sizes, k, world)
    want = []
    for i, n in enumerate(sizes):
        acc = None
        for j in range(k):
            for r in range(world):
                x = grads[r][i * k + j].astype(np.float32)
                acc = x.copy() if acc is None else (acc + x).astype(np.float32)
        want.append(acc)
    want = np.concatenate(want)
    assert got.tobytes() == want.tobytes()
    # and the order matters for these values: rank order reversed differs somewhere
    if world * k > 2 and sum(sizes) > 100:
        rev = []
        for i, n in enumerate(sizes):
            acc = None
            for j in range(k):
                for r in reversed(range(world)):
                    x = grads[r][i * k + j]
                    acc = x.copy() if acc is None else (acc + x).astype(np.float32)
            rev.append(acc)
        assert np.concatenate(rev).tobytes() != want.tobytes()


def test_plan_pieces_cover_each_gradient_once():
    sizes, k, world = [10, 3, 8], 3, 4
    c, pieces = exchange_plan(sizes, k, world)
    assert c == 6                       # ceil(21 / 4)
    covered = {}
    for m, src, dst, n in pieces:
        assert 0 < n and dst // (k * c) == (dst + n - 1) // (k * c)   # one block
        for t in range(n):
            assert (m, src + t) not in covered
            covered[(m, src + t)] = dst + t
    assert len(covered) == k * sum(sizes)
    assert len(set(covered.values())) == len(covered)   # no two land in one place
