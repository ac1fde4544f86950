"""The stated float32 order of the running sums and products (cumsum_rows, cumprod_rows;
native/common/formulas/sort.h), written here from its text in NumPy, independent of torchlean.

Within chunks of 256 entries a sequential running value; chunk c > 0 then combines its carry,
the running value of the chunk totals just before it, with each of its own. The totals' running
values are sequential when a row has at most 256 chunks, and take this same order (one level
up) beyond."""
import numpy as np

CHUNK = 256


def chunked_running(x, op):
    """op (np.add or np.multiply) running along the 1-D float32 array x, in the stated order."""
    local = np.empty_like(x)
    totals = []
    for c0 in range(0, x.size, CHUNK):
        acc = None
        for j in range(c0, min(c0 + CHUNK, x.size)):
            acc = x[j] if acc is None else np.float32(op(acc, x[j]))
            local[j] = acc
        totals.append(acc)
    if len(totals) <= 1:
        return local
    if len(totals) <= CHUNK:
        run = np.empty(len(totals), np.float32)
        run[0] = totals[0]
        for c in range(1, len(totals)):
            run[c] = np.float32(op(run[c - 1], totals[c]))
    else:
        run = chunked_running(np.array(totals, np.float32), op)
    y = local.copy()
    for j in range(CHUNK, x.size):
        y[j] = np.float32(op(run[j // CHUNK - 1], local[j]))
    return y
