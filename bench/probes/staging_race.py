"""What tl_graph_wait_inputs guards against: the back-to-back replay test of
tests/test_graph_step.py run as it is and with the wait made a no-op, so a call may rewrite a
ring entry of the pinned staging while a queued replay has not read it yet. With the wait the
parameters equal float64 SGD over the batches in order; without it the error shows the race
(or the device stayed within a ring's depth of the host this time). Needs the CUDA backend.

    TORCHLEAN_BACKEND=cuda python3 bench/probes/staging_race.py
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


class _NoWait:
    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    def tl_graph_wait_inputs(self, g):
        return 0


def main() -> int:
    import torchlean as tl
    from torchlean import _loader
    import test_graph_step as t
    if tl.backend() != "cuda":
        print("staging_race.py: needs the CUDA backend (TORCHLEAN_BACKEND=cuda)")
        return 2
    real = _loader.lib
    for wait in (True, False):
        for kind in ("array", "tensor"):
            _loader.lib = real if wait else _NoWait(real)
            try:
                t.test_back_to_back_replays_read_each_calls_inputs(kind)
                verdict = "equals float64 SGD"
            except AssertionError as e:
                verdict = "DIFFERS: " + str(e).strip().splitlines()[0][:160]
            finally:
                _loader.lib = real
                tl.synchronize()
            print(f"wait={'on ' if wait else 'off'} x={kind}: {verdict}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
