"""Shared fixtures: the backend under test and the GPU marker.

`@pytest.mark.cuda` tests skip without a CUDA backend, except when TORCHLEAN_REQUIRE_CUDA=1,
where they fail: a GPU run can never pass by skipping.
"""
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))



class _NoTorchBesideASan:
    """PyTorch, an optional extra reference, does not load beside AddressSanitizer (`make
    sanitize` preloads libasan): there `import torch` raises ModuleNotFoundError, so its cross-checks
    skip as if it were not installed (nothing is put in sys.modules, which other libraries
    inspect)."""

    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError("torch is not loaded beside AddressSanitizer", name=name)
        return None


if "libasan" in os.environ.get("LD_PRELOAD", ""):
    sys.meta_path.insert(0, _NoTorchBesideASan())


def pytest_configure(config):
    """Under `make sanitize`, a pytest worker (started with leaks checked) hands its children
    detect_leaks=0: the worker processes, which run every in-process test, still have their
    leaks checked at exit, while the programs tests start (examples, CLIs, each paying a
    whole-heap leak scan of an interpreter at exit) keep ASan and UBSan but skip that scan."""
    opts = os.environ.get("ASAN_OPTIONS", "")
    if hasattr(config, "workerinput") and "detect_leaks=1" in opts:
        os.environ["ASAN_OPTIONS"] = opts.replace("detect_leaks=1", "detect_leaks=0")


# Modules that test the stub library's own arithmetic (its exp, its GEMM summation order) or fake
# device pointers with the stub's host pointers (the NCCL communicator against a fake NCCL). On a
# CUDA run they are not collected in this process; test_parity.py runs them in a stub
# subprocess instead, so a CUDA run covers them without skipping anything.
STUB_ONLY_MODULES = ("test_stub_exp.py", "test_stub_gemm.py", "test_distributed_nccl.py",
                     "test_sort_kernels.py")


CUDA_SKIP = "they need the CUDA backend (TORCHLEAN_BACKEND=cuda on a GPU machine)"


def skip_reasons(reports) -> list[tuple[int, str]]:
    """(count, reason) of the skipped test reports, most common first."""
    counts = {}
    for rep in reports:
        longrepr = getattr(rep, "longrepr", None)
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else "?"
        reason = reason.removeprefix("Skipped: ")
        counts[reason] = counts.get(reason, 0) + 1
    return sorted(((n, r) for r, n in counts.items()), key=lambda nr: (-nr[0], nr[1]))


def pytest_terminal_summary(terminalreporter):
    """Say why tests were skipped: one line per reason (the three most common), so a CPU run's
    hundreds of skips read as what they are."""
    reasons = skip_reasons(terminalreporter.stats.get("skipped", []))
    for n, reason in reasons[:3]:
        terminalreporter.write_line(f"{n} test{'s' if n != 1 else ''} skipped: {reason}")
    rest = reasons[3:]
    if rest:
        terminalreporter.write_line(f"{sum(n for n, _ in rest)} more skipped for {len(rest)} "
                                    "other reasons (pytest -rs lists them)")


def pytest_ignore_collect(collection_path, config):
    if collection_path.name in STUB_ONLY_MODULES:
        import torchlean
        return torchlean.backend() != "stub" or None
    return None


def pytest_collection_modifyitems(config, items):
    import torchlean
    require = os.environ.get("TORCHLEAN_REQUIRE_CUDA") == "1"
    if require and torchlean.backend() != "cuda":
        raise pytest.UsageError("TORCHLEAN_REQUIRE_CUDA=1 but the loaded backend is "
                                f"{torchlean.backend()!r}")
    if torchlean.backend() == "cuda":
        _deselect_multigpu(config, items)
        return
    skip = pytest.mark.skip(reason=CUDA_SKIP)
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


def pytest_unconfigure(config):
    """Drop the tape's shared placeholder of forgotten nodes (a module global that the
    interpreter's teardown never frees), so that its released Buffer is destroyed before exit:
    `make sanitize`'s leak check then finds no torchlean handle alive at exit. (The exiting
    thread's default Session is dropped by torchlean.session itself, at exit.)"""
    nodes = sys.modules.get("torchlean.tape_nodes")
    if nodes is not None:
        nodes.forgotten.clear()


@pytest.fixture(autouse=True)
def _deterministic_off():
    """Each test starts with deterministic mode off and leaves it so."""
    import torchlean
    torchlean.set_deterministic(False)
    yield
    torchlean.set_deterministic(False)


def _deselect_multigpu(config, items):
    """`multigpu(n)` tests need one GPU per rank; a CUDA run that sees fewer than n GPUs does not
    collect them (the multi-GPU run, bench/gpu_ddp_run.sh, does)."""
    from torchlean._loader import ffi, lib
    n = ffi.new("int64_t *")
    lib.tl_device_count(n)

    def needs(it):
        m = it.get_closest_marker("multigpu")
        return (m.args[0] if m and m.args else 2) if m else 0

    drop = [it for it in items if needs(it) > n[0]]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = [it for it in items if needs(it) <= n[0]]
