"""python -m torchlean.audit: run (record a command), diff, certificate, compare-torch.

Exit status: 0 identical (or done), 1 the records differ, 2 bad input (a file that is not a
complete record, records of different runs, a command that recorded nothing)."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

from torchlean.audit.certificate import certificate
from torchlean.audit.compare_torch import compare_torch
from torchlean.audit.diff import RecordMismatch, diff
from torchlean.audit.recordfile import Record, RecordFileError


def _run(args) -> int:
    if not args.command:
        print("torchlean.audit run: no command given (… run --out F -- python train.py)",
              file=sys.stderr)
        return 2
    out = os.path.abspath(args.out)
    if os.path.exists(out):
        os.remove(out)
    env = dict(os.environ, TORCHLEAN_AUDIT=out)
    rc = subprocess.call(args.command, env=env)
    if not os.path.exists(out):
        print(f"torchlean.audit run: {' '.join(args.command)} never imported torchlean: "
              f"nothing recorded in {args.out}", file=sys.stderr)
        return 2
    if rc != 0:
        print(f"torchlean.audit run: the command exited with status {rc}", file=sys.stderr)
        return rc
    rec = Record(out)
    print(f"recorded: {rec.ops} ops, {rec.steps} steps -> {args.out}")
    return 0


def _diff(args) -> int:
    status, lines = diff(Record(args.a), Record(args.b))
    print("\n".join(lines))
    return status


def _certificate(args) -> int:
    print("\n".join(certificate(Record(args.file))))
    return 0


def _compare_torch(args) -> int:
    return compare_torch(args.command, steps=args.steps, rtol=args.rtol, atol=args.atol)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m torchlean.audit", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run a command with recording on (TORCHLEAN_AUDIT)")
    r.add_argument("--out", required=True, help="the .tlaudit file to write")
    r.add_argument("command", nargs=argparse.REMAINDER, help="-- python train.py ARGS")
    d = sub.add_parser("diff", help="compare two records; name the first difference")
    d.add_argument("a")
    d.add_argument("b")
    c = sub.add_parser("certificate", help="print a record's certificate")
    c.add_argument("file")
    t = sub.add_parser("compare-torch", help="a PyTorch script under torch and under torchlean")
    t.add_argument("--steps", type=int, default=2, help="optimizer steps compared (default 2)")
    t.add_argument("--rtol", type=float, default=1e-4)
    t.add_argument("--atol", type=float, default=1e-5)
    t.add_argument("command", nargs=argparse.REMAINDER, help="-- python script.py ARGS")
    args = p.parse_args(argv)
    if getattr(args, "command", None) and args.command[0] == "--":
        args.command = args.command[1:]
    handler = {"run": _run, "diff": _diff, "certificate": _certificate,
               "compare-torch": _compare_torch}[args.cmd]
    try:
        return handler(args)
    except (RecordFileError, RecordMismatch) as e:
        print(f"torchlean.audit {args.cmd}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
