"""torch.distributed's names (init_process_group, get_rank, all_reduce with ReduceOp, ...) and
DistributedSampler: a world of one in-process, two ranks under mpiexec, and the sampler's
shares against torch's rules written out here (ceil/floor sizes, padding from the start)."""
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

import torchlean
import torchlean.distributed as dist
from torchlean.distributed import DistributedSampler, ReduceOp


def _shares(n, world, **kw):
    return [list(DistributedSampler(range(n), num_replicas=world, rank=r, **kw))
            for r in range(world)]


@pytest.mark.parametrize("n,world", [(10, 3), (1, 4), (7, 1), (12, 4), (13, 2)])
def test_sampler_shares_cover_the_dataset_with_torch_padding(n, world):
    for shuffle in (False, True):
        shares = _shares(n, world, shuffle=shuffle, seed=5)
        per = math.ceil(n / world)
        assert [len(s) for s in shares] == [per] * world
        flat = [i for s in shares for i in s]
        assert sorted(set(flat)) == list(range(n))        # every index somewhere
        assert len(flat) - n == per * world - n           # padding only as much as needed
        if not shuffle:   # rank r takes positions r, r + world, ... of 0..n-1 padded from 0
            order = (list(range(n)) * (per * world // n + 1))[:per * world]
            assert shares == [order[r::world] for r in range(world)]


def test_sampler_drop_last_cuts_the_tail():
    shares = _shares(10, 3, shuffle=False, drop_last=True)
    assert shares == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]


def test_sampler_epoch_and_seed_fix_the_permutation():
    a = list(DistributedSampler(range(50), num_replicas=2, rank=0, seed=1))
    b = list(DistributedSampler(range(50), num_replicas=2, rank=0, seed=1))
    assert a == b
    s = DistributedSampler(range(50), num_replicas=2, rank=0, seed=1)
    s.set_epoch(1)
    assert list(s) != a and sorted(list(s) + list(_epoch_share(1))) == list(range(50))
    assert list(DistributedSampler(range(50), num_replicas=2, rank=0, seed=2)) != a


def _epoch_share(epoch):
    s = DistributedSampler(range(50), num_replicas=2, rank=1, seed=1)
    s.set_epoch(epoch)
    return s


def test_sampler_rejects_bad_arguments():
    with pytest.raises(ValueError, match="Invalid rank 3"):
        DistributedSampler(range(4), num_replicas=3, rank=3)
    with pytest.raises(ValueError, match="num_replicas must be >= 1"):
        DistributedSampler(range(4), num_replicas=0, rank=0)
    with pytest.raises(TypeError, match="rank must be an int"):
        DistributedSampler(range(4), num_replicas=2, rank=1.0)
    with pytest.raises(RuntimeError, match="init_process_group"):
        DistributedSampler(range(4))


def test_world_of_one_with_torch_names():
    dist.init_process_group()
    try:
        assert dist.is_initialized() and dist.get_rank() == 0 and dist.get_world_size() == 1
        t = torchlean.tensor([1.5, -2.0])
        assert dist.all_reduce(t, op=ReduceOp.SUM) is None
        np.testing.assert_array_equal(t.numpy(), [1.5, -2.0])
        assert dist.all_reduce(t, op=ReduceOp.AVG, async_op=True).wait()
        with pytest.raises(ValueError, match=r"ReduceOp.AVG\), got <ReduceOp.MAX"):
            dist.all_reduce(t, op=ReduceOp.MAX)
        with pytest.raises(ValueError, match="process groups other than the default"):
            dist.get_rank(group="g")
        assert len(DistributedSampler(range(5))) == 5
    finally:
        dist.destroy_process_group()
    assert not dist.is_initialized()


def test_init_process_group_refuses_what_it_cannot_do():
    other = "gloo" if torchlean.backend() == "cuda" else "nccl"
    with pytest.raises(ValueError, match=f"backend '{other}' is not available"):
        dist.init_process_group(other)
    with pytest.raises(ValueError, match="init_method 'tcp://"):
        dist.init_process_group(init_method="tcp://10.0.0.1:23456")
    with pytest.raises(ValueError, match="rank=1 but the launcher started this process as rank 0"):
        dist.init_process_group(rank=1)
    assert not dist.is_initialized()


def _scenario(out: Path) -> None:
    """Each rank: join with init_process_group, sum and average a tensor, broadcast, shares."""
    dist.init_process_group(backend=None)
    r, w = dist.get_rank(), dist.get_world_size()
    t = torchlean.tensor(np.arange(5, dtype=np.float32) * (r + 1))
    dist.all_reduce(t, op=ReduceOp.SUM)
    a = torchlean.tensor(np.full(3, float(r + 1), np.float32))
    dist.all_reduce(a, op=ReduceOp.AVG)
    b = torchlean.tensor(np.full(2, float(r * 10 + 7), np.float32))
    dist.broadcast(b, src=1)
    dist.barrier()
    share = list(DistributedSampler(range(11), seed=4))
    (out / f"rank{r}.json").write_text(json.dumps(
        {"world": w, "sum": t.numpy().tolist(), "avg": a.numpy().tolist(),
         "bcast": b.numpy().tolist(), "share": share}))
    dist.destroy_process_group()


@pytest.mark.multigpu(2)
def test_two_ranks_under_mpiexec(tmp_path):
    from test_distributed import launch_script
    res = launch_script(2, Path(__file__), tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    got = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for g in got:
        assert g["world"] == 2
        assert g["sum"] == (np.arange(5) * 3).tolist()
        assert g["avg"] == [1.5] * 3
        assert g["bcast"] == [17.0, 17.0]
    assert sorted(got[0]["share"] + got[1]["share"]) == sorted(list(range(11)) + [got[0]["share"][0]])


if __name__ == "__main__":
    _scenario(Path(sys.argv[1]))
