"""Pure-Python reference of torchlean's counter-based RNG (bit-exact with the native kernels).

Session-level draws (Session.rand_uniform, dropout masks, nn.init) take their key from one
process-wide stream: manual_seed(seed) resets it, next_key() is key_of(seed, counter) and advances
the counter.

Inside `micro_batch(step, index)` the d-th draw's key is micro_key(seed, step, index, d) instead,
and the counter stands still: a draw depends on the seed, the optimizer step and the global
micro-batch index only, not on how many micro-batches this process ran before. So rank r of a
data-parallel job draws, for its micro-batch, exactly what one process accumulating every
micro-batch draws for the same one (examples/_common.py and DistributedDataParallel set it).

A Generator (torch.Generator) is a stream of the same form, (seed, counter), of its own: the
factories, multinomial, nn.init, random_split and DataLoader take one as generator= and then
leave the process-wide stream where it was. default_generator is the process-wide stream seen
through the same interface (torchlean.manual_seed returns it).

Why counter-based: element i is a function of (key, i) only, so a draw is reproducible on any
backend, thread count or CUDA grid, and a key is derived from (seed, counter) without state.
"""
from __future__ import annotations

import contextlib
import os
import threading

import numpy as np

from torchlean import _capture
from torchlean import devices as _devices

_M64 = (1 << 64) - 1


def splitmix64(x: int) -> int:
    """SplitMix64 finaliser of x + golden gamma, as tl_splitmix64."""
    z = (x + 0x9E3779B97F4A7C15) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def key_of(seed: int, counter: int) -> int:
    """The key of the counter-th draw of a generator seeded with seed."""
    return splitmix64((seed + counter) & _M64)


_MICRO_DOMAIN = 0x6D6963726F626174   # "microbat": micro-batch keys never meet key_of's


def micro_key(seed: int, step: int, index: int, draw: int) -> int:
    """The key of the draw-th draw of micro-batch `index` of optimizer step `step`."""
    k = splitmix64((seed ^ _MICRO_DOMAIN) & _M64)
    k = splitmix64((k + step) & _M64)
    k = splitmix64((k + index) & _M64)
    return splitmix64((k + draw) & _M64)


# micro: [step, index, draws] or None; graph: the counter at a captured step's first draw
_stream = {"seed": 0, "counter": 0, "micro": None, "graph": None}
_stream_lock = threading.Lock()   # threads drawing keys at once each get a distinct counter value


def _seed_value(op: str, seed) -> int:
    """torch's seed rule: int(seed) in [-2**63, 2**64), negatives taken modulo 2**64."""
    try:
        s = int(seed)
    except (TypeError, ValueError):
        raise TypeError(f"{op}: seed must be an integer, got {type(seed).__name__} "
                        f"{seed!r}") from None
    if not -(1 << 63) <= s <= _M64:
        raise ValueError(f"{op}: Overflow when unpacking long long: seed {s} is outside "
                         f"[-2**63, 2**64)")
    return s & _M64


def manual_seed(seed: int) -> "Generator":
    """Seed the process-wide key stream: every Session draw (rand_uniform, bernoulli_mask,
    dropout) and every nn.init initialiser, in all threads; resets the per-call counter. NumPy's
    and Python's generators are not touched. Returns torchlean.default_generator, as torch."""
    s = _seed_value("manual_seed", seed)
    with _stream_lock:
        _stream["seed"] = s
        _stream["counter"] = 0
    return default_generator


def next_key() -> int:
    """The key of the next session-level draw: key_of(seed, counter), and the counter advances;
    inside micro_batch(step, index), micro_key(seed, step, index, d) for the d-th draw there."""
    _refuse_in_capture()
    return _next_key()


def _refuse_in_capture() -> None:
    if _capture.STATE.strict:
        raise RuntimeError(
            "graph_step: a host-side random draw (randint, randperm, nn.init, a DataLoader "
            "shuffle, a Generator's draw) inside a captured step would be frozen in the graph; "
            "draw it outside the step and pass it in")


def _next_key() -> int:
    with _stream_lock:
        seed, micro = _stream["seed"], _stream["micro"]
        if micro is not None:
            d = micro[2]
            micro[2] = d + 1
            return micro_key(seed, micro[0], micro[1], d)
        c = _stream["counter"]
        _stream["counter"] = c + 1
    return key_of(seed, c)


def next_device_key() -> int:
    """The key argument of a native rng kernel: next_key(), except inside a captured step
    (torchlean.cuda.graph_step), where it is the draw's place d within the step: the kernel
    reads key_of(seed, counter0 + d) from the graph's device state, so each replay draws what
    the eager step would. The counter advances the same either way."""
    c0 = _stream["graph"]
    if c0 is None:
        return _next_key()
    with _stream_lock:
        if _stream["micro"] is not None:
            raise RuntimeError("graph_step: draws inside micro_batch() cannot be captured (their "
                               "keys depend on the step index); capture a step without it")
        c = _stream["counter"]
        _stream["counter"] = c + 1
    return c - c0


def _nonneg_int(what: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
        raise ValueError(f"micro_batch: {what} must be an integer >= 0, got {v!r}")
    return int(v)


@contextlib.contextmanager
def micro_batch(step: int, index: int):
    """Key the draws inside by (seed, step, index): `step` is the optimizer step, `index` the
    micro-batch's place in that step's global batch (over every rank). The draws restart at
    d = 0 on entry and the stream's counter does not move. Nesting replaces the outer scope
    until the inner one ends."""
    new = [_nonneg_int("step", step), _nonneg_int("index", index), 0]
    with _stream_lock:
        prev = _stream["micro"]
        _stream["micro"] = new
    try:
        yield
    finally:
        with _stream_lock:
            _stream["micro"] = prev


def current_micro_batch() -> tuple[int, int] | None:
    """(step, index) of the micro_batch scope in force, or None outside any."""
    m = _stream["micro"]
    return None if m is None else (m[0], m[1])


def get_rng_state() -> np.ndarray:
    """The session RNG's (seed, counter) as a uint64 array of 2: every later draw and
    initialiser is a function of it, so set_rng_state() of a saved copy replays them."""
    return np.array([_stream["seed"], _stream["counter"]], dtype=np.uint64)


def _state_pair(op: str, state) -> tuple[int, int]:
    a = np.asarray(state)
    if a.shape != (2,) or a.dtype.kind not in "iu":
        raise ValueError(f"{op}: expected the integer array of shape (2,) that "
                         f"get_rng_state() returns, got {a.dtype} array of shape {a.shape}")
    if a.dtype.kind == "i" and (a < 0).any():
        raise ValueError(f"{op}: seed and counter must be >= 0, got {a.tolist()}")
    return int(a[0]) & _M64, int(a[1])


def set_rng_state(state) -> None:
    seed, counter = _state_pair("set_rng_state", state)
    with _stream_lock:
        _stream["seed"], _stream["counter"] = seed, counter


def _draws(key: int, start: int, count: int, step: int = 1) -> np.ndarray:
    """Low 32 bits of splitmix64(key + start + step*j), j < count, vectorised in uint64."""
    with np.errstate(over="ignore"):
        idx = np.arange(count, dtype=np.uint64) * np.uint64(step) + np.uint64(start)
        z = idx + np.uint64(key & _M64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def uniform(n: int, key: int) -> np.ndarray:
    """u_i = (draw_i >> 8) * 2^-24 in [0, 1), float32."""
    return ((_draws(key, 0, n) >> 8).astype(np.float32) * np.float32(2.0 ** -24)).astype(np.float32)


def bernoulli(n: int, key: int, p: float) -> np.ndarray:
    """1.0 where u_i < p (p rounded to float32), else 0.0."""
    return (uniform(n, key) < np.float32(p)).astype(np.float32)


def _cos_2pi(u: np.ndarray) -> np.ndarray:
    """cos(2 pi u) in double after tlm_cos_2pi's exact reduction: t = |u - round(u)| = q/4 + s,
    |s| <= 1/8, then cos, -sin or -cos of 2 pi s (exact at multiples of 1/4, where it is -0)."""
    t = np.abs(u - np.round(u))
    q = np.round(4.0 * t)
    s = t - q / 4.0
    c, sn = np.cos(2.0 * np.pi * s), np.sin(2.0 * np.pi * s)
    return np.where(q == 0, c, np.where(q == 1, -sn, -c))


def normal(n: int, key: int, mean: float = 0.0, std: float = 1.0) -> np.ndarray:
    """Box-Muller on draws 2i and 2i+1 in float32 operations, as the rand_normal kernel
    (native/common/formulas/rng.h): z = sqrt(-2 log u1) cos(2 pi u2), y = mean + std z, every
    step rounded to float32, mean and std rounded to float32 first.

    log and cos are correctly rounded there. Here they are computed in double and rounded
    once: over every u1 = k 2^-24 (k = 1..2^24) and u2 = k 2^-24 (k < 2^24) the true value lies
    at least 2^-47.6 (relative) from a float32 rounding midpoint, far beyond the double
    functions' error, so the rounding is the correct one and the bits are the kernel's."""
    f = np.float32
    u1 = ((_draws(key, 0, n, 2) >> 8).astype(np.float64) + 1.0) * 2.0 ** -24
    u2 = (_draws(key, 1, n, 2) >> 8).astype(np.float64) * 2.0 ** -24
    log_u1 = np.log(u1).astype(f)
    cos_u2 = _cos_2pi(u2).astype(f)
    cos_u2[cos_u2 == 0] = f(-0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        z = np.sqrt(f(-2.0) * log_u1) * cos_u2
        return (f(mean) + f(std) * z).astype(f)


def permutation(n: int, key: int) -> np.ndarray:
    """A permutation of range(n) as int64: the stable argsort of n draws of `key` (randperm's
    and the DataLoader's shuffle)."""
    return np.argsort(_draws(key, 0, n), kind="stable").astype(np.int64)


# ------------------------------------------------------------------------------ Generator

_DEFAULT_GENERATOR_SEED = 67280421310721     # torch.Generator().initial_seed()


class Generator:
    """torch.Generator: a key stream of its own, (seed, counter) as the process-wide one, so a
    factory given generator=g draws key_of(g's seed, g's counter) and leaves the global stream
    (and every other Generator) where it was. Same seed, same draws, on every backend."""

    def __init__(self, device="cpu"):
        d = _devices.device(device)
        if d.type == "cuda":
            _devices.check_cuda("Generator")
        self.device = d
        self._seed, self._counter = _DEFAULT_GENERATOR_SEED, 0
        self._lock = threading.Lock()

    def manual_seed(self, seed) -> "Generator":
        s = _seed_value("Generator.manual_seed", seed)
        with self._lock:
            self._seed, self._counter = s, 0
        return self

    def seed(self) -> int:
        """Reseed from the operating system's entropy and return the new seed."""
        s = int.from_bytes(os.urandom(8), "little") & ((1 << 63) - 1)
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> np.ndarray:
        """(seed, counter) as a uint64 array of 2 (torchlean.get_rng_state's form)."""
        with self._lock:
            return np.array([self._seed, self._counter], dtype=np.uint64)

    def set_state(self, new_state) -> "Generator":
        seed, counter = _state_pair("Generator.set_state", new_state)
        with self._lock:
            self._seed, self._counter = seed, counter
        return self

    def next_key(self) -> int:
        """The key of this generator's next draw (the counter advances)."""
        _refuse_in_capture()
        with self._lock:
            c = self._counter
            self._counter = c + 1
            return key_of(self._seed, c)

    def __getstate__(self):
        """Copies and pickles carry the stream's place, not the lock."""
        return {"device": str(self.device), "seed": self._seed, "counter": self._counter}

    def __setstate__(self, state):
        self.device = _devices.device(state["device"])
        self._seed, self._counter = state["seed"], state["counter"]
        self._lock = threading.Lock()

    def __repr__(self):
        return f"<torchlean.Generator seed={self._seed} counter={self._counter}>"


class _DefaultGenerator(Generator):
    """torch.default_generator: the process-wide stream itself (manual_seed, micro_batch and
    graph_step keys included), seen through the Generator interface."""

    def __init__(self):
        super().__init__("cpu")

    def manual_seed(self, seed) -> "Generator":
        return manual_seed(seed)

    def initial_seed(self) -> int:
        return _stream["seed"]

    def get_state(self) -> np.ndarray:
        return get_rng_state()

    def set_state(self, new_state) -> "Generator":
        set_rng_state(new_state)
        return self

    def next_key(self) -> int:
        return next_key()

    def __reduce__(self):
        return "default_generator"          # a copy of the process-wide stream is itself

    def __repr__(self):
        return f"<torchlean.default_generator seed={_stream['seed']} counter={_stream['counter']}>"


default_generator = _DefaultGenerator()


def initial_seed() -> int:
    """The seed of the process-wide stream (torch.initial_seed)."""
    return _stream["seed"]


def seed() -> int:
    """Seed the process-wide stream from the operating system's entropy; returns the seed."""
    return default_generator.seed()


def key_for(op: str, generator) -> int:
    """The key of the next host-side draw of `op`: from `generator` when one is given, else
    from the process-wide stream."""
    if generator is None:
        return next_key()
    if not isinstance(generator, Generator):
        raise TypeError(f"{op}: generator must be a torchlean.Generator, got "
                        f"{type(generator).__name__}")
    return generator.next_key()


def device_key_for(op: str, generator) -> int:
    """The key argument of a native rng kernel: next_device_key() without a generator (so a
    captured step replays its draws), else the generator's next key (outside captured steps)."""
    if generator is None or generator is default_generator:
        return next_device_key()
    return key_for(op, generator)
