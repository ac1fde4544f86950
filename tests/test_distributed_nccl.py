"""The NCCL communicator's Python side on a machine without a GPU: NCCLComm driven through a
fake libnccl and a fake CUDA runtime, in a world of one whose "device pointers" are the stub's
host pointers. Checks the calls it makes (ordering after torchlean's stream, grouping, counts,
buffers), the all-gather layout DistributedDataParallel reads, asynchronous NCCL errors, and the
abort at the deadline. The real library runs in tests/test_distributed.py on a GPU machine."""
from __future__ import annotations

import ctypes
import time

import numpy as np
import pytest

import torchlean as tl
from torchlean.distributed import DistributedError, nccl_comm


class FakeNCCL:
    def __init__(self):
        self.calls, self.async_error, self.aborted = [], 0, False
        self.reduce, self.seen = None, []
        self.sent = {}

    def ncclGetUniqueId(self, ref):
        ctypes.memmove(ctypes.addressof(ref._obj), bytes(range(1, 129)), 128)
        return 0

    def ncclCommInitRank(self, ref, world, uid, rank):
        self.calls.append(("init", world, ctypes.string_at(ctypes.addressof(uid), 128), rank))
        ref._obj.value = 4242
        return 0

    def ncclGroupStart(self):
        self.calls.append(("group_start",))
        return 0

    def ncclGroupEnd(self):
        self.calls.append(("group_end",))
        return 0

    def ncclAllReduce(self, send, recv, n, dtype, op, comm, stream):
        self.calls.append(("all_reduce", send, recv, n, dtype, op, comm, stream))
        if self.reduce is not None:      # what the other ranks would have added
            data = np.ctypeslib.as_array((ctypes.c_float * n).from_address(recv))
            self.seen.append(data.copy())
            data[...] = self.reduce(data)
        return 0

    def ncclBroadcast(self, send, recv, n, dtype, root, comm, stream):
        self.calls.append(("broadcast", send, recv, n, dtype, root, comm, stream))
        return 0

    def ncclAllGather(self, send, recv, n, dtype, comm, stream):
        self.calls.append(("all_gather", send, recv, n, dtype, comm, stream))
        ctypes.memmove(recv, send, 4 * n)        # world of one: the gather is a copy
        return 0

    def ncclSend(self, send, n, dtype, peer, comm, stream):
        self.calls.append(("send", send, n, dtype, peer, comm, stream))
        self.sent[peer] = send
        return 0

    def ncclRecv(self, recv, n, dtype, peer, comm, stream):
        self.calls.append(("recv", recv, n, dtype, peer, comm, stream))
        ctypes.memmove(recv, self.sent.pop(peer), 4 * n)   # world of one: from itself
        return 0

    def ncclCommGetAsyncError(self, comm, ref):
        ref._obj.value = self.async_error
        return 0

    def ncclCommAbort(self, comm):
        self.aborted = True
        return 0

    def ncclCommDestroy(self, comm):
        return 0

    def ncclGetErrorString(self, r):
        return b"unhandled cuda error"

    def ncclGetLastError(self, comm):
        return b"peer gone"


class FakeRuntime:
    COMPUTE, COMM = 7, 99

    def __init__(self):
        self.log, self.done, self._n = [], True, 0

    def set_device(self, dev):
        self.log.append(("set_device", dev))

    def stream(self, high_priority=False):
        return self.COMM

    def event(self):
        self._n += 1
        return 1000 + self._n

    def record(self, ev, stream):
        self.log.append(("record", ev, stream))

    def wait_event(self, stream, ev):
        self.log.append(("wait", stream, ev))

    def query(self, ev):
        return self.done

    def copy_d2d(self, dst, src, nbytes, stream):
        self.log.append(("copy", dst, src, nbytes, stream))
        ctypes.memmove(dst, src, nbytes)

    def destroy_event(self, ev):
        pass

    def destroy_stream(self, s):
        pass


class FakeMPI:
    rank, world, timeout_s, failed = 0, 1, 0.3, False

    def bcast_bytes(self, data, n, src, what):
        assert len(data) == n == 128
        return data

    def allgather_array(self, a, what):
        return np.asarray(a)[None]

    def allgather_array_start(self, a, what):
        return lambda: np.asarray(a)[None]

    def barrier(self, what="barrier"):
        pass

    def fail(self):
        self.failed = True

    def close(self):
        pass


@pytest.fixture
def comm(monkeypatch):
    if tl.backend() != "stub":
        pytest.skip("fakes device pointers with the stub's host pointers")
    fake, rt = FakeNCCL(), FakeRuntime()
    monkeypatch.setattr(nccl_comm, "load_nccl", lambda: (fake, "fake"))
    monkeypatch.setattr(nccl_comm, "_declare", lambda L: None)
    monkeypatch.setattr(nccl_comm, "CudaRuntime", lambda: rt)
    monkeypatch.setattr(nccl_comm.NCCLComm, "_library_stream",
                        staticmethod(lambda: FakeRuntime.COMPUTE))
    c = nccl_comm.NCCLComm(FakeMPI(), device=0)
    yield c, fake, rt
    rt.done = True
    c.close()        # stops the watchdog thread, if one started
    assert c._watchdog is None


def test_init_sends_the_whole_unique_id(comm):
    c, fake, rt = comm
    assert fake.calls[0] == ("init", 1, bytes(range(1, 129)), 0)
    assert c.comm == 4242 and ("set_device", 0) in rt.log


def test_all_reduce_is_ordered_after_torchleans_stream_and_grouped(comm):
    c, fake, rt = comm
    c.flat_bytes = 0                     # every buffer reduced where it is
    a = tl.AnyBuffer.from_numpy(np.arange(5.0))
    b = tl.AnyBuffer.from_numpy(np.zeros((0,)))
    e = tl.AnyBuffer.from_numpy(np.ones((2, 3)))
    fake.calls.clear()
    c.all_reduce([a, b, e], "bucket 0").wait()
    pa, pe = a.buf.data_ptr(), e.buf.data_ptr()
    assert fake.calls == [("group_start",),
                          ("all_reduce", pa, pa, 5, 7, 0, 4242, FakeRuntime.COMM),
                          ("all_reduce", pe, pe, 6, 7, 0, 4242, FakeRuntime.COMM),
                          ("group_end",)]
    ready = rt.log[-3][1]
    assert rt.log[-3:] == [("record", ready, FakeRuntime.COMPUTE), ("wait", FakeRuntime.COMM, ready),
                           ("record", rt.log[-1][1], FakeRuntime.COMM)]


def test_small_buffers_share_one_flat_all_reduce(comm):
    """Buffers under flat_bytes go through one flat buffer: copied in on the communication
    stream after torchlean's work, one NCCL call on all of them, copied back before the done
    event; a large one is reduced in place in the same group. The fake reduction doubles
    (two ranks holding the same values), so the copies back are checked too."""
    c, fake, rt = comm
    c.flat_bytes = 64
    a = tl.AnyBuffer.from_numpy(np.arange(5.0))              # 20 bytes: flat
    big = tl.AnyBuffer.from_numpy(np.linspace(0, 1, 17))     # 68 bytes: in place
    e = tl.AnyBuffer.from_numpy(np.full((2, 3), -1.5))       # 24 bytes: flat
    z = tl.AnyBuffer.from_numpy(np.zeros((0,)))
    fake.calls.clear()
    rt.log.clear()
    fake.reduce = lambda x: 2 * x
    for _ in range(2):                   # the second step reuses the flat buffer
        c.all_reduce([a, big, z, e], "bucket 0", average=True).wait()
    flat = fake.calls[1][1]
    pb = big.buf.data_ptr()
    assert fake.calls[:4] == [("group_start",),
                              ("all_reduce", flat, flat, 11, 7, 4, 4242, FakeRuntime.COMM),
                              ("all_reduce", pb, pb, 17, 7, 4, 4242, FakeRuntime.COMM),
                              ("group_end",)]
    assert fake.calls[4:] == fake.calls[:4] and list(c._flats) == [11]
    np.testing.assert_array_equal(fake.seen[0], np.r_[np.arange(5.0), np.full(6, -1.5)])
    np.testing.assert_array_equal(a.to_numpy(), 4 * np.arange(5.0))
    np.testing.assert_array_equal(e.to_numpy(), np.full((2, 3), -6.0))
    np.testing.assert_allclose(big.to_numpy(), 4 * np.linspace(0, 1, 17), rtol=1e-7)
    kinds = [x[0] for x in rt.log[:7]]
    assert kinds == ["record", "wait", "copy", "copy", "copy", "copy", "record"]
    copies = [x for x in rt.log[:7] if x[0] == "copy"]
    assert all(x[4] == FakeRuntime.COMM for x in copies)
    assert [x[1:4] for x in copies] == [(flat, a.buf.data_ptr(), 20),
                                        (flat + 20, e.buf.data_ptr(), 24),
                                        (a.buf.data_ptr(), flat, 20),
                                        (e.buf.data_ptr(), flat + 20, 24)]


def test_flat_bytes_variable(monkeypatch):
    monkeypatch.setenv("TORCHLEAN_DDP_FLAT_BYTES", "0")
    assert nccl_comm.flat_bytes_from_env() == 0
    monkeypatch.delenv("TORCHLEAN_DDP_FLAT_BYTES")
    assert nccl_comm.flat_bytes_from_env() == nccl_comm.FLAT_BYTES
    for bad in ("-1", "lots"):
        monkeypatch.setenv("TORCHLEAN_DDP_FLAT_BYTES", bad)
        with pytest.raises(ValueError, match="TORCHLEAN_DDP_FLAT_BYTES"):
            nccl_comm.flat_bytes_from_env()


def test_all_gather_layout_and_ddp_exact_path(comm, monkeypatch):
    """outs[i] holds rank r's copy at r * n; DistributedDataParallel's exact path over it gives
    the local gradient back in a world of one."""
    import torchlean.distributed as dist
    from torchlean.nn.parallel import DistributedDataParallel
    from torchlean.session import Session
    from torchlean import nn
    c, fake, rt = comm
    x = tl.AnyBuffer.from_numpy(np.linspace(-1, 1, 7))
    work, outs = c.all_gather([x], "g")
    work.wait()
    assert outs[0].n == 7
    np.testing.assert_array_equal(outs[0].to_numpy(), x.to_numpy())
    monkeypatch.setitem(dist._state, "comm", c)
    for exact in (True, False):
        tl.set_deterministic(exact)
        lin = nn.Linear(3, 2)
        ddp = DistributedDataParallel(lin)
        ref = nn.Linear(3, 2)
        ref.load_state_dict(lin.state_dict())
        s = Session()
        xin = np.array([[0.5, -1.0, 2.0]])
        fake.calls.clear()                    # (the wrap's broadcast, the gather above)
        ddp(s.tensor(xin)).sum().backward()
        ref(s.tensor(xin)).sum().backward()
        s.step()
        kinds = [call[0] for call in fake.calls if call[0] not in ("group_start", "group_end")]
        # exact: the bucket's 8 floats (bias, weight) to every rank (all-to-all: each rank sums
        # its chunk in rank order), the summed chunks gathered back; default: NCCL's all-reduce
        assert kinds == (["send", "recv", "all_gather"] if exact
                         else ["all_reduce", "all_reduce"])
        # the end of backward does not block the host: torchlean's stream waits (order())
        assert ("wait", FakeRuntime.COMPUTE) in {entry[:2] for entry in rt.log}
        rt.log.clear()
        # the mean is NCCL's (ncclAvg = 4): no scale kernel per parameter
        assert all(call[5] == 4 for call in fake.calls if call[0] == "all_reduce")
        for p, q in zip(lin.parameters(), ref.parameters()):
            np.testing.assert_array_equal(p.grad, q.grad)
        # two micro-batches: exact mode gathers both (.grad after no_sync holds the second
        # alone until the reduction), the result is the accumulated sum either way
        fake.calls.clear()
        for q in ref.parameters():
            q.zero_grad()
        for p in lin.parameters():
            p.zero_grad()
        xs = [xin, np.array([[1.5, 0.25, -3.0]])]
        with ddp.no_sync():
            ddp(s.tensor(xs[0])).sum().backward()
        ddp(s.tensor(xs[1])).sum().backward()
        for xm in xs:
            ref(s.tensor(xm)).sum().backward()
        s.step()
        n = [(call[0], call[2] if call[0] in ("send", "recv") else call[3])
             for call in fake.calls if call[0] not in ("group_start", "group_end")]
        # exact: both micro-batches' 8 floats in one message, the sum (8 floats) gathered;
        # default: one call each for bias and weight (flat buckets are opt-in,
        # TORCHLEAN_DDP_FLAT_BYTES; test_flat_bucket_* cover them)
        assert n == ([("send", 16), ("recv", 16), ("all_gather", 8)] if exact
                     else [("all_reduce", 2), ("all_reduce", 6)])
        for p, q in zip(lin.parameters(), ref.parameters()):
            np.testing.assert_array_equal(p.grad, q.grad)
        ddp.remove_hooks()
        fake.calls.clear()
    dist.all_reduce(x, op="avg")          # copy_into after the scale kernel: x unchanged
    np.testing.assert_allclose(x.to_numpy(), np.linspace(-1, 1, 7), rtol=1e-7)


def test_async_nccl_error_aborts_and_names_the_rank(comm):
    c, fake, rt = comm
    rt.done, fake.async_error = False, 1
    with pytest.raises(DistributedError, match=r"rank 0: broadcast.*NCCL error 1 "
                                               r"\(unhandled cuda error\): peer gone"):
        c.broadcast([tl.AnyBuffer.from_numpy(np.ones(3))], 0, "broadcast").wait()
    assert fake.aborted and c.host.failed


def test_deadline_aborts_the_communicator(comm):
    c, fake, rt = comm
    rt.done = False
    with pytest.raises(DistributedError, match=r"rank 0: bucket 3 .*did not complete within "
                                               r"0.3 s"):
        c.all_reduce([tl.AnyBuffer.from_numpy(np.ones(3))], "bucket 3").wait()
    assert fake.aborted and c.comm is None and c.host.failed


def _until(cond, limit_s: float = 5.0) -> float:
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < limit_s, "the watchdog did nothing"
        time.sleep(1e-3)
    return time.monotonic() - t0


def test_order_makes_the_stream_wait_and_the_watchdog_recycles_the_event(comm):
    """Work.order() returns without waiting on the host: torchlean's stream waits for the
    collective's event, which the watchdog returns to the pool once it completed."""
    c, fake, rt = comm
    rt.done = False
    c.all_reduce([tl.AnyBuffer.from_numpy(np.ones(3))], "bucket 0").order()
    last = [e for e in rt.log if e[0] == "wait"][-1]    # (the watchdog logs its set_device)
    done = last[2]
    assert last == ("wait", FakeRuntime.COMPUTE, done) and done not in c._events
    assert [w[0] for w in c._watched] == [done] and not fake.aborted
    rt.done = True
    _until(lambda: done in c._events)
    assert c._watched == [] and not fake.aborted and c.error is None


def test_watchdog_aborts_at_the_deadline_and_the_next_collective_raises(comm):
    c, fake, rt = comm
    rt.done = False
    c.all_reduce([tl.AnyBuffer.from_numpy(np.ones(3))], "bucket 5").order()
    assert not fake.aborted                      # the host went on
    took = _until(lambda: fake.aborted)
    assert took >= 0.25 and c.comm is None and c.host.failed
    with pytest.raises(DistributedError, match=r"rank 0: bucket 5 .*did not complete within "
                                               r"0.3 s"):
        c.broadcast([tl.AnyBuffer.from_numpy(np.ones(3))], 0, "next")


def test_watchdog_aborts_on_an_asynchronous_nccl_error(comm):
    c, fake, rt = comm
    rt.done, fake.async_error = False, 1
    c.all_reduce([tl.AnyBuffer.from_numpy(np.ones(3))], "bucket 2").order()
    assert _until(lambda: fake.aborted) < 0.25
    with pytest.raises(DistributedError, match=r"rank 0: bucket 2 .*NCCL error 1 "
                                               r"\(unhandled cuda error\)"):
        c.barrier()
