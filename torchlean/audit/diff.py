"""Where two records part: the first record whose digests differ, and why.

Records are compared in order. The first one that differs is explained from what the record
holds: an op whose inputs are identical in both runs computed differently; an op with a
differing input got it from before it (a leaf: a parameter, a batch, a value made outside the
tape); a VJP whose incoming gradient is identical computed differently; an optimizer step
names its differing hyperparameters and gradients. Records of differently named scripts, or
with different step counts, are not compared (RecordMismatch).
"""
from __future__ import annotations

from torchlean.audit.recordfile import Record

KIND = {"F": "forward", "B": "backward (VJP)", "S": "optimizer step"}


class RecordMismatch(ValueError):
    """Two records that cannot be compared (the message names the files and what differs)."""


def _shape(s) -> str:
    return "(" + ", ".join(map(str, s)) + ("," if len(s) == 1 else "") + ")"


def _structure(r):
    """What must match for two records to be the same op of the same program."""
    if r[0] == "F":
        return r[:5] + [[s if isinstance(s, int) else "leaf" for s, _ in r[6]]]
    if r[0] == "B":
        return r[:5] + [None if o is None else o[0] for o in r[6]]
    return r[:3] + [[e[0], e[1], e[2] is None, sorted(e[4])] for e in r[5]]


def _digests(r):
    if r[0] == "F":
        return [r[5], [d for _, d in r[6]]]
    if r[0] == "B":
        return [r[5], [None if o is None else o[1] for o in r[6]]]
    return [r[3], [e[2:] for e in r[5]]]


def _describe(r) -> str:
    if r[0] == "F":
        return f"{r[2]} {' '.join(_shape(s) for s in r[3])} -> {_shape(r[4])}"
    if r[0] == "B":
        return (f"VJP of {r[2]} (forward record {r[3]}), gradient {_shape(r[4])} -> "
                + " ".join("-" if o is None else _shape(o[0]) for o in r[6]))
    return f"{r[2]}.step() over {len(r[5])} parameters and buffers"


def _why(ra, rb) -> list[str]:
    """Lines saying whether the record's own computation or its inputs differ."""
    if ra[0] == "F":
        bad = [(j, sa, da, db) for j, ((sa, da), (_, db)) in enumerate(zip(ra[6], rb[6]))
               if da != db]
        if not bad:
            return [f"its inputs are identical in both runs: this op computed differently "
                    f"(output {ra[5]} vs {rb[5]})"]
        return [f"input {j} ({'record ' + str(s) if isinstance(s, int) else repr(s) + ', a leaf'}"
                f", shape {_shape(ra[3][j])}) differs ({da} vs {db}): the difference came from "
                "earlier" + ("" if isinstance(s, int) else ", before this op (a parameter, a "
                             "batch or a value made outside the tape)") for j, s, da, db in bad]
    if ra[0] == "B":
        if ra[5] != rb[5]:
            return [f"its incoming gradient differs ({ra[5]} vs {rb[5]}): the difference came "
                    "from earlier (the gradients summed into it from the ops that read "
                    f"record {ra[3]})"]
        return ["its inputs (the incoming gradient and forward record "
                f"{ra[3]}) are identical in both runs: this VJP computed differently"]
    lines = []
    for g, (ga, gb) in enumerate(zip(ra[3], rb[3])):
        for k in sorted(set(ga) | set(gb)):
            if ga.get(k) != gb.get(k):
                lines.append(f"hyperparameter {k} of group {g} differs: {ga.get(k)!r} vs "
                             f"{gb.get(k)!r}")
    grads = [ea[0] for ea, eb in zip(ra[5], rb[5]) if ea[2] != eb[2]]
    if grads:
        lines.append("the gradients of " + ", ".join(grads) + " differ: the difference came "
                     "from earlier (their accumulation)")
    if not lines:
        lines.append("its gradients and hyperparameters are identical in both runs: the "
                     "update computed differently")
    return lines


def _params_differing(a: Record, b: Record, k: int):
    """(step, names of parameters and buffers differing) at the first step record from k."""
    for j in range(k, min(len(a.records), len(b.records))):
        ra, rb = a.records[j], b.records[j]
        if ra[0] == "S" and rb[0] == "S":
            return ra[1], [ea[0] for ea, eb in zip(ra[5], rb[5]) if ea[3] != eb[3]]
    return None, None


def check_comparable(a: Record, b: Record) -> list[str]:
    """Raise RecordMismatch for records of different runs; return notes on what else differs."""
    if a.header.get("script") != b.header.get("script"):
        raise RecordMismatch(f"{a.path} and {b.path} record different scripts: "
                             f"{a.header.get('script')!r} vs {b.header.get('script')!r}")
    if a.steps != b.steps:
        raise RecordMismatch(f"{a.path} and {b.path} record different step counts: {a.steps} "
                             f"vs {b.steps} optimizer steps")
    notes = []
    for key in ("mode", "torchlean", "exact_version", "registry"):
        if a.header.get(key) != b.header.get(key):
            notes.append(f"note: {key} differs: {a.header.get(key)} ({a.path}) vs "
                         f"{b.header.get(key)} ({b.path})")
    if a.trailer.get("modes") != b.trailer.get("modes") and not notes[:1]:
        notes.append(f"note: modes differ: {', '.join(a.trailer.get('modes', []))} ({a.path}) "
                     f"vs {', '.join(b.trailer.get('modes', []))} ({b.path})")
    return notes


def diff(a: Record, b: Record) -> tuple[int, list[str]]:
    """(exit status, lines): 0 and `identical: N ops, S steps`, or 1 and the first difference."""
    lines = check_comparable(a, b)
    start = 0   # the first record of the current step
    for k, (ra, rb) in enumerate(zip(a.records, b.records)):
        if _structure(ra) != _structure(rb):
            lines += [f"the runs part at step {ra[1]}, op {k - start} (record {k}): different "
                      "ops ran",
                      f"  {a.path}: {KIND[ra[0]]} {_describe(ra)}",
                      f"  {b.path}: {KIND[rb[0]]} {_describe(rb)}"]
            return 1, lines
        if _digests(ra) != _digests(rb):
            lines.append(f"first difference: step {ra[1]}, op {k - start} of the step (record "
                         f"{k}), {KIND[ra[0]]}: {_describe(ra)}")
            lines += ["  " + s for s in _why(ra, rb)]
            step, names = _params_differing(a, b, k)
            if step is None:
                lines.append("  no optimizer step follows it")
            else:
                lines.append(f"  parameters that differ at the end of step {step}: "
                             + (", ".join(names) if names else "none"))
            return 1, lines
        if ra[0] == "S":
            start = k + 1
    if len(a.records) != len(b.records):
        short, long_ = (a, b) if len(a.records) < len(b.records) else (b, a)
        lines.append(f"the runs part after record {len(short.records)}: {short.path} ends "
                     f"there, {long_.path} records {len(long_.records) - len(short.records)} "
                     "more")
        return 1, lines
    lines.append(f"identical: {a.ops} ops, {a.steps} steps")
    return 0, lines
