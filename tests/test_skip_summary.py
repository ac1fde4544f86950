"""conftest's summary of why tests were skipped: grouped by reason, most common first."""
from types import SimpleNamespace

from conftest import CUDA_SKIP, skip_reasons


def _skipped(reason):
    return SimpleNamespace(longrepr=("tests/test_x.py", 3, f"Skipped: {reason}"))


def test_skips_are_counted_by_reason_most_common_first():
    reports = [_skipped(CUDA_SKIP)] * 5 + [_skipped("needs torch")] * 2 + [_skipped("b")] * 2
    assert skip_reasons(reports) == [(5, CUDA_SKIP), (2, "b"), (2, "needs torch")]
    assert skip_reasons([]) == []
    assert skip_reasons([SimpleNamespace(longrepr=None)]) == [(1, "?")]
